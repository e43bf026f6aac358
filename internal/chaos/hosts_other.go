//go:build !linux

package chaos

import (
	"context"
	"errors"
	"net"

	"go.uber.org/zap"
)

type netHost struct {
	name string
	num  byte
}

func (h *netHost) ip() string     { return hostAddr(int(h.num)).String() }
func (h *netHost) wrap() []string { return nil }
func (h *netHost) dial(context.Context, string, string) (net.Conn, error) {
	return nil, errors.ErrUnsupported
}
func (h *netHost) listen(string, string) (net.Listener, error) { return nil, errors.ErrUnsupported }

type hostNetwork struct {
	hosts map[string]*netHost
	fab   *fabric
}

func namespacesUsable() string { return "network namespaces need Linux" }

func newHostNetwork(map[string]byte, int64, *zap.Logger) (*hostNetwork, error) {
	return nil, errors.New(namespacesUsable())
}

func (n *hostNetwork) host(name string) *netHost { return n.hosts[name] }
func (n *hostNetwork) close()                    {}
