package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/registrum/registrum/sdk/client"
	"github.com/registrum/registrum/sdk/tokensource"
)

// Case is a record of the example registry's cases route; a registry's own
// types come from `registrum generate go`.
type Case struct {
	CaseNumber     string `json:"caseNumber"`
	SupportType    string `json:"supportType"`
	HealthDistrict string `json:"healthDistrict"`
	Status         string `json:"status"`
	OpenedOn       string `json:"openedOn"`
}

// A client with tokens from the private-key-JWT token source; create a
// record, change it under its ETag, branch on a refusal.
func Example() {
	ctx := context.Background()
	key, err := tokensource.LoadKeyFile("client-keys/demo-standard.jwk")
	if err != nil {
		log.Fatal(err)
	}
	tokens, err := tokensource.New(tokensource.Config{TokenURL: "http://127.0.0.1:8081/token", ClientID: "demo-standard", Key: key})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	cw := client.WithAccessProfile("caseworker")

	// An Idempotency-Key is generated: the create is retried safely.
	rec, err := c.Create(ctx, "cases", Case{CaseNumber: "CS-0001", SupportType: "maintenance", HealthDistrict: "north", Status: "open", OpenedOn: "2026-11-01"}, cw)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Patch(ctx, "cases", rec.ID, rec.ETag, []client.PatchOp{client.Replace("status", "closed")}, cw)
	switch {
	case client.IsCode(err, client.CodePreconditionFailed):
		fmt.Println("someone changed the case since it was read: read it again")
	case err != nil:
		log.Fatal(err)
	}
}

// Every open case of a district, following the cursors page after page.
func ExampleClient_Records() {
	ctx := context.Background()
	c, _ := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Tokens: client.StaticToken("…")})
	q := client.Query{Filter: "healthDistrict eq 'north' and status eq 'open'", OrderBy: []string{"caseNumber"}, Top: 100}
	for it, err := range c.Records(ctx, "cases", q, client.WithAccessProfile("caseworker")) {
		if err != nil {
			log.Fatal(err)
		}
		var kase Case
		if err := it.Decode(&kase); err != nil {
			log.Fatal(err)
		}
		fmt.Println(kase.CaseNumber)
	}
}

// Read again only when the record changed: a 304 carries no body.
func ExampleClient_ReadIfChanged() {
	ctx := context.Background()
	c, _ := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Tokens: client.StaticToken("…")})
	cw := client.WithAccessProfile("caseworker")
	rec, err := c.Read(ctx, "cases", "0b7c…", nil, cw)
	if err != nil {
		log.Fatal(err)
	}
	for range time.Tick(time.Minute) {
		res, err := c.ReadIfChanged(ctx, "cases", rec.ID, rec.ETag, nil, cw)
		if err != nil {
			log.Fatal(err)
		}
		if !res.NotModified {
			rec = res.Record
			fmt.Println("revision", rec.Revision)
		}
	}
}

// A change request: create the draft, then follow the actions its reads
// offer (their hrefs and ifMatch), never composing a route.
func ExampleClient_Act() {
	ctx := context.Background()
	c, _ := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Tokens: client.StaticToken("…")})
	cw := client.WithAccessProfile("caseworker")
	draft, err := c.Create(ctx, "child-details-changes", map[string]any{"childId": "4f2e…", "phone": "040-123-4567"}, cw)
	if err != nil {
		log.Fatal(err)
	}
	submit, ok := draft.Request.Action("submit_request")
	if !ok {
		log.Fatal("submit is not offered")
	}
	// Submit needs no member; the host records the caller as the actor.
	if _, err := c.Act(ctx, submit, client.ActionInput{}, cw); err != nil {
		log.Fatal(err)
	}
	now, err := c.Read(ctx, "child-details-changes", draft.ID, nil, cw)
	if err != nil {
		log.Fatal(err)
	}
	if apply, ok := now.Request.Action("apply_request"); ok {
		res, err := c.Act(ctx, apply, client.ActionInput{ActorReference: "clerk-17"}, cw)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.EngineState) // applied
	}
}

// Every retained proposal of a change request, across history pages.
func ExampleClient_RequestHistory() {
	ctx := context.Background()
	c, _ := client.New(client.Options{BaseURL: "http://127.0.0.1:8080", Tokens: client.StaticToken("…")})
	for p, err := range c.RequestHistory(ctx, "child-details-changes", "9a41…", client.WithAccessProfile("caseworker")) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(p.ProposalVersion, p.SubmittedAt.Format(time.RFC3339), p.Outcome)
	}
}

// The spatial adapter needs no token for public collections.
func ExampleClient_Features() {
	ctx := context.Background()
	c, _ := client.New(client.Options{BaseURL: "http://127.0.0.1:8080"})
	box := &client.BBox{West: 24.5, South: 60.1, East: 25.3, North: 60.4}
	for f, err := range c.Features(ctx, "service-offices", client.FeatureQuery{BBox: box}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f.ID, f.Geometry.Coordinates)
	}
}
