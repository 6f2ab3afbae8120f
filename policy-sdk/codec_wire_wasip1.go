//go:build wasip1 && !edgellm_abicodec

package sdk

// wireCodec selects Call's codec: in the guest, the bulk-copy wire codec
// (wire.go). With the host's deadline on, wazero checks for termination at
// every loop back-edge; the abi codec's per-element loops over the 128-entry
// arrays cost about 20 µs per call that way, the wire codec none.
const wireCodec = true
