package project

import (
	"reflect"
	"strings"
	"testing"

	"github.com/registrum/registrum/model"
)

// withRetryHook returns the minimal project with one url hook on parcel
// whose retry member is retry ("" for none).
func withRetryHook(t *testing.T, retry string) string {
	t.Helper()
	hook := "      - {id: parcel-created, phase: after, trigger: created, projection: [area], handler: {kind: url, destinationId: crm}"
	if retry != "" {
		hook += ", retry: " + retry
	}
	doc := strings.Replace(minimal(t), "      - {kind: unique, fields: [parcel-code]}\n",
		"      - {kind: unique, fields: [parcel-code]}\n    hooks:\n"+hook+"}\n", 1)
	if !strings.Contains(doc, "parcel-created") {
		t.Fatal("the minimal project changed: no place for the hook")
	}
	return doc
}

// A hook's retry member compiles into its delivery policy: omitted, the
// default day-long schedule; authored, its attempts and pauses (attempts
// default to one more than the pauses, pauses to the default's).
func TestRetrySchedulesCompileIntoTheDeliveryPolicy(t *testing.T) {
	def := model.DefaultDelivery()
	if def.MaximumAttempts != 10 || def.RetryProfile != model.RetryProfileDefault {
		t.Fatalf("default policy %+v", def)
	}
	if span := model.RetrySpan(def.RetryDelaysMs, def.MaximumAttempts); span.Hours() < 20 || span.Hours() > 30 {
		t.Fatalf("the default schedule spans %s, not about a day", span)
	}
	for _, tc := range []struct {
		retry    string
		attempts int
		delays   []int
		profile  string
	}{
		{"", 10, model.DefaultRetryDelaysMs, model.RetryProfileDefault},
		{"{maximumAttempts: 3}", 3, model.DefaultRetryDelaysMs, model.RetryProfileAuthored},
		{"{delays: [500ms, 1s, 1m]}", 4, []int{500, 1000, 60_000}, model.RetryProfileAuthored},
		{"{maximumAttempts: 12, delays: [1m, 1m, 2h]}", 12, []int{60_000, 60_000, 7_200_000}, model.RetryProfileAuthored},
		{"{maximumAttempts: 1}", 1, model.DefaultRetryDelaysMs, model.RetryProfileAuthored},
		{"{maximumAttempts: 6, delays: [24h]}", 6, []int{86_400_000}, model.RetryProfileAuthored},
	} {
		res, fs := compileText(t, withRetryHook(t, tc.retry), opts(false))
		if fs != nil {
			t.Fatalf("retry %q: %v", tc.retry, fs)
		}
		d := res.Package.Entities[0].Hook("parcel-created").Delivery
		if d.MaximumAttempts != tc.attempts || !reflect.DeepEqual(d.RetryDelaysMs, tc.delays) || d.RetryProfile != tc.profile {
			t.Errorf("retry %q: policy %+v, want %d attempts on %v (%s)", tc.retry, d, tc.attempts, tc.delays, tc.profile)
		}
	}
}

// Each rule of an authored schedule refuses what breaks it, at its path.
func TestRetrySchedulesThatBreakARuleAreRefused(t *testing.T) {
	for _, tc := range []struct{ retry, path, want string }{
		{"{delays: [5 seconds]}", "retry.delays[0]", "is not a pause"},
		{"{delays: [1.5s]}", "retry.delays[0]", "is not a pause"},
		{"{delays: [99ms]}", "retry.delays[0]", "outside"},
		{"{delays: [25h]}", "retry.delays[0]", "outside"},
		{"{delays: [1m, 30s]}", "retry.delays[1]", "shorter than the pause before it"},
		{"{maximumAttempts: 21}", "retry.maximumAttempts", "at most 20"},
		{"{delays: [1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s]}", "retry.maximumAttempts", "this schedule makes 21"},
		// 8 pauses of 24 h (28.8 days with jitter) outlast the 7-day retention.
		{"{maximumAttempts: 9, delays: [24h]}", "retry", "an event would expire while it is retried"},
		{"{delays: []}", "retry.delays", "at least 1 item"},
	} {
		_, fs := compileText(t, withRetryHook(t, tc.retry), opts(false))
		found := false
		for _, f := range fs {
			if strings.HasSuffix(f.Path, tc.path) && strings.Contains(f.Message, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("retry %s: findings %v, want one at %s saying %q", tc.retry, fs, tc.path, tc.want)
		}
	}
	// A retry schedule without a handler has nothing to retry.
	doc := strings.Replace(withRetryHook(t, "{maximumAttempts: 3}"), "handler: {kind: url, destinationId: crm}, ", "", 1)
	_, fs := compileText(t, doc, opts(false))
	if len(fs) != 1 || fs[0].Rule != "hook.retry" || !strings.Contains(fs[0].Message, "needs a handler") {
		t.Fatalf("retry without a handler: %v", fs)
	}
}
