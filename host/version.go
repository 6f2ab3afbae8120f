package host

// Version is the edgellm version, set at link time by the Makefile
// (-X github.com/edgellm/edgellm/host.Version=...).
var Version = "dev"
