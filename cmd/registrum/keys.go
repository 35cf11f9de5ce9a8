package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/issuer/keys"
)

func init() { register(newKeysCmd) }

// newKeysCmd wires `registrum keys`: key generation for the issuer and its clients.
func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create signing keys for the token issuer and its clients",
	}
	cmd.AddCommand(newKeysGenerateCmd())
	return cmd
}

func newKeysGenerateCmd() *cobra.Command {
	var alg, secretsRoot, publicOut, name string
	cmd := &cobra.Command{
		Use:   "generate --alg ES256|EdDSA|RS256 --secrets-root DIR --public-out DIR [--name NAME]",
		Short: "Generate a key pair: an owner-only private JWK secret and a public JWK named by its thumbprint",
		Long: `Generate a key pair.

The private JWK is written to DIR/NAME under --secrets-root (file 0600, folder 0700)
and is referred to as secret:file/NAME. The public JWK is written to
--public-out as <kid>.json, where kid is its RFC 7638 thumbprint. ES256 keys serve as
the issuer's local signing key (signing.activePublicJwkFile + signer.privateKeyRef);
ES256, EdDSA and RS256 keys serve as client assertion keys.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if alg == "" || secretsRoot == "" || publicOut == "" {
				return withExitCode(2, errors.New("keys generate: --alg, --secrets-root and --public-out are required"))
			}
			g, err := keys.GenerateFiles(alg, secretsRoot, publicOut, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "kid: %s\n", g.KeyID)
			fmt.Fprintf(out, "secret: %s\n", g.SecretRef)
			fmt.Fprintf(out, "public: %s\n", g.PublicPath)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&alg, "alg", "", "key algorithm: ES256, EdDSA or RS256")
	f.StringVar(&secretsRoot, "secrets-root", "", "secret root folder that receives the private JWK (created 0700 if missing)")
	f.StringVar(&publicOut, "public-out", "", "folder that receives the public JWK <kid>.json")
	f.StringVar(&name, "name", "", "secret file name (default jwk-<kid>)")
	return cmd
}
