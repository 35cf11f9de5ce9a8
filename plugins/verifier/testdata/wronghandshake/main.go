// Command wronghandshake is a test verifier built for another protocol
// version than the host speaks.
package main

import (
	"github.com/hashicorp/go-plugin"

	"github.com/registrum/registrum/plugins/verifier/proto"
	"github.com/registrum/registrum/sdk/verifier"
)

func main() {
	hs := proto.Handshake
	hs.ProtocolVersion = 99
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: hs,
		Plugins:         plugin.PluginSet{proto.PluginName: &proto.Plugin{Receiver: verifier.NewReceiver(nil)}},
	})
}
