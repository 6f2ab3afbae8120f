//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package sdk

import "github.com/edgellm/edgellm/abi"

// On big-endian targets the Go value's bytes are not the wire bytes: the
// wire codec is abi's (these targets never run a guest; they only run native
// tests).

func wireDecodeSensors(src []byte, s *abi.Sensors) error   { return abi.DecodeSensors(src, s) }
func wireDecodeDecision(src []byte, d *abi.Decision) error { return abi.DecodeDecision(src, d) }
func wireEncodeDecision(dst []byte, d *abi.Decision) error { return abi.EncodeDecision(dst, d) }
