// Command morethreads is a test policy (TestRunThreadsCap): every call it
// asks for 64 threads and changes nothing else.
package main

import (
	"github.com/edgellm/edgellm/abi"
	sdk "github.com/edgellm/edgellm/policy-sdk"
)

func init() { sdk.Register(Decide) }

func main() {}

// Decide asks for more threads than any machine here has.
func Decide(_ *abi.Sensors, d *abi.Decision) { d.Threads = 64 }
