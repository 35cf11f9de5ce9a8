package store

import (
	"context"
	"fmt"
)

// The states each counted table allows (its CHECK constraint, or River's
// job state enum): the record host's metrics report every one of them,
// zero when no row holds it, so that a state appears before its first row.
var (
	// JobStates are River's job states.
	JobStates = []string{"available", "cancelled", "completed", "discarded", "pending", "retryable", "running", "scheduled"}
	// VerificationVerdicts are the verdicts of attachment verifications.
	VerificationVerdicts = []string{"pending", "approved", "rejected"}
	// ReviewSubmissionStates are the states of review authority submissions.
	ReviewSubmissionStates = []string{"pending", "accepted", "uncertain", "cancelling", "cancelled", "failed"}
	// ReviewResultStatuses are the statuses of review authority results.
	ReviewResultStatuses = []string{"approved", "rejected", "changesRequested", "answered", "cancelled", "superseded"}
	// RequestStates are the workflow states of change requests.
	RequestStates = []string{"draft", "submitted", "applied", "cancelled"}
	// DeliveryStates are the states of event deliveries.
	DeliveryStates = []string{"pending", "leased", "delivered", "dead_lettered", "expired", "failed"}
)

// JobCount is the number of post-commit jobs of one kind in one state.
type JobCount struct {
	Kind, State string
	Count       int64
}

// Counts are the row counts the record host's metrics report, read in one
// statement. Each map holds the states that have rows, by state.
type Counts struct {
	// Jobs are River's jobs by kind and state (completed and discarded jobs
	// stay until River's cleaner removes them: a day by default).
	Jobs []JobCount
	// Verifications are attachment verifications by verdict.
	Verifications map[string]int64
	// ReviewSubmissions are review authority submissions by state.
	ReviewSubmissions map[string]int64
	// ReviewResults are the review authorities' results by status.
	ReviewResults map[string]int64
	// Requests are change requests by workflow state.
	Requests map[string]int64
	// Deliveries are event deliveries by state.
	Deliveries map[string]int64
}

// countsSQL counts every table of Counts in one round trip. Each part is a
// grouped count of one table: a scan of it, cheap for the sizes these
// tables reach between River's and the payload expiry's clean-ups, and
// bounded by the caller's context.
const countsSQL = `
SELECT 'jobs', kind, state::text, count(*) FROM ` + JobSchema + `.river_job GROUP BY kind, state
UNION ALL SELECT 'verifications', '', verdict, count(*) FROM registrum.attachment_verifications GROUP BY verdict
UNION ALL SELECT 'review_submissions', '', state, count(*) FROM registrum.review_submissions GROUP BY state
UNION ALL SELECT 'review_results', '', status, count(*) FROM registrum.review_results GROUP BY status
UNION ALL SELECT 'requests', '', state, count(*) FROM registrum.requests GROUP BY state
UNION ALL SELECT 'deliveries', '', state, count(*) FROM registrum.event_deliveries GROUP BY state`

// Counts reads the row counts the record host's metrics report. It writes
// nothing.
func (s *Store) Counts(ctx context.Context) (*Counts, error) {
	rows, err := s.pool.Query(ctx, countsSQL)
	if err != nil {
		return nil, fmt.Errorf("store: count rows for metrics: %w", err)
	}
	defer rows.Close()
	c := &Counts{Verifications: map[string]int64{}, ReviewSubmissions: map[string]int64{}, ReviewResults: map[string]int64{},
		Requests: map[string]int64{}, Deliveries: map[string]int64{}}
	for rows.Next() {
		var table, kind, state string
		var n int64
		if err := rows.Scan(&table, &kind, &state, &n); err != nil {
			return nil, fmt.Errorf("store: count rows for metrics: %w", err)
		}
		switch table {
		case "jobs":
			c.Jobs = append(c.Jobs, JobCount{Kind: kind, State: state, Count: n})
		case "verifications":
			c.Verifications[state] = n
		case "review_submissions":
			c.ReviewSubmissions[state] = n
		case "review_results":
			c.ReviewResults[state] = n
		case "requests":
			c.Requests[state] = n
		case "deliveries":
			c.Deliveries[state] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: count rows for metrics: %w", err)
	}
	return c, nil
}
