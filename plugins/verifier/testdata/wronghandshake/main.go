// Command wronghandshake is a test verifier built for another protocol
// version than the host speaks.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/registrum/registrum/plugins/verifier/wire"
	"github.com/registrum/registrum/sdk/verifier"
)

func main() {
	hs := wire.Handshake
	hs.ProtocolVersion = 99
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		Plugins:         plugin.PluginSet{wire.PluginName: &wire.Plugin{Receiver: verifier.NewReceiver(nil)}},
	})
}
