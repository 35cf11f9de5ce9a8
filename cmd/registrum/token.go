package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/registrum/registrum/sdk/tokensource"
)

func init() { register(newTokenCmd) }

func newTokenCmd() *cobra.Command {
	var issuerURL, tokenURL, clientID, keyFile, audience string
	cmd := &cobra.Command{
		Use:   "token (--token-url URL | --issuer URL) --client-id ID --key FILE [--audience AUD]",
		Short: "Obtain an access token with a private-key-JWT client assertion and print it",
		Long: `Obtain an access token with a private-key-JWT client assertion and print it.

The assertion's audience is the issuer identifier, learned from the issuer's
discovery document (docs/decisions/client-assertion-audience.md): give the
issuer's URL (--issuer) or its token endpoint (--token-url); --audience
overrides it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokenURL == "" && issuerURL == "" {
				return withExitCode(2, errors.New("token: --token-url or --issuer is required"))
			}
			key, err := tokensource.LoadKeyFile(keyFile)
			if err != nil {
				return withExitCode(2, err)
			}
			src, err := tokensource.New(tokensource.Config{Issuer: issuerURL, TokenURL: tokenURL, ClientID: clientID, Key: key, Audience: audience})
			if err != nil {
				return withExitCode(2, err)
			}
			tok, err := src.Token(cmd.Context())
			var refusal *tokensource.Error
			if errors.As(err, &refusal) {
				fmt.Fprintln(cmd.OutOrStdout(), string(refusal.Body))
				return withExitCode(1, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok.AccessToken)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokenURL, "token-url", "", "token endpoint URL (default: the one the issuer's discovery document names)")
	f.StringVar(&issuerURL, "issuer", "", "the issuer's URL: its identifier, its listener (http://127.0.0.1:PORT for registrum dev) or the URL of its discovery document")
	f.StringVar(&clientID, "client-id", "", "client id (required)")
	f.StringVar(&keyFile, "key", "", "the client's private JWK file, owner-only (required)")
	f.StringVar(&audience, "audience", "", "client assertion audience (default: the issuer identifier of the discovery document)")
	for _, name := range []string{"client-id", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}
