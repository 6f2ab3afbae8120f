//go:build !wasip1 || edgellm_abicodec

package sdk

// wireCodec selects Call's codec. Natively it is the abi codec, so native
// tests of a policy run the reference decode and encode (wire_test.go checks
// the wire codec against it). A guest built with -tags edgellm_abicodec uses
// it too; BenchmarkGuestCodec compares the two in the guest.
const wireCodec = false
