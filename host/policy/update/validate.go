package update

import (
	"context"
	"fmt"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

// AddModule runs the host's loader on wasm (policy.ValidateModule with
// cfg: size, Wasm validation, imports, exports, instantiation, ABI major)
// and, only if it passes, stages it in r under the ABI version the module
// itself reports. A module every host would refuse is never signed.
func AddModule(ctx context.Context, r *Repo, cfg policy.Config, wasm []byte, o AddOptions) (*Custom, error) {
	v, err := policy.ValidateModule(ctx, cfg, wasm)
	if err != nil {
		return nil, fmt.Errorf("add %s: the host's loader refuses the module: %w", o.Name, err)
	}
	if v.Major != abi.VersionMajor {
		return nil, fmt.Errorf("add %s: module speaks ABI %d.%d, hosts speak %d.x", o.Name, v.Major, v.Minor, abi.VersionMajor)
	}
	o.ABIMajor, o.ABIMinor = int(v.Major), int(v.Minor)
	return r.Add(wasm, o)
}
