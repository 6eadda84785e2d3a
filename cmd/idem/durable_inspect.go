package main

import (
	"encoding/json"
	"time"

	"github.com/idemgo/idem/durable"
)

// inspectedInstance is the JSON idem durable inspect prints: the fields of
// durable.Summary (list's) under the same names and in the same order,
// then the rest of the row and the inbox. Times and fields an instance
// does not have (no lease, not finished, no key…) are left out.
type inspectedInstance struct {
	durable.Summary // flattened by encoding/json: list's names, in list's order

	// CorrelationScope is there with a key only; empty, it says that the
	// key is an address and not unique.
	CorrelationScope []durable.Status `json:"correlation_scope,omitzero"`
	Reaps            int              `json:"reaps"`
	ConcurrencyKey   string           `json:"concurrency_key,omitempty"`
	RateLimit        string           `json:"rate_limit,omitempty"`
	RateLimitWeight  int              `json:"rate_limit_weight,omitzero"` // with a rate limit only
	Awaiting         []string         `json:"awaiting,omitempty"`
	AwaitDeadline    time.Time        `json:"await_deadline,omitzero"`
	LeaseOwner       string           `json:"lease_owner,omitempty"`
	LeaseExpiresAt   time.Time        `json:"lease_expires_at,omitzero"`
	State            json.RawMessage  `json:"state"`
	Result           json.RawMessage  `json:"result,omitempty"`
	InsertedAt       time.Time        `json:"inserted_at"`
	FinishedAt       time.Time        `json:"finished_at,omitzero"`
	// InboxLen counts the pending signals; Inbox holds the oldest of them,
	// up to durable.GetInboxLimit (and GetInboxBytes of payload).
	InboxLen int               `json:"inbox_len"`
	Inbox    []inspectedSignal `json:"inbox,omitempty"`
}

// inspectedSignal is a signal of the inbox, as inspect prints it.
type inspectedSignal struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	Payload    json.RawMessage `json:"payload"`
	DedupKey   string          `json:"dedup_key,omitempty"`
	InsertedAt time.Time       `json:"inserted_at"`
}

// inspectInstance is what inspect prints of in.
func inspectInstance(in *durable.Instance) inspectedInstance {
	out := inspectedInstance{
		Summary: durable.Summary{
			ID: in.ID, FSM: in.FSM, Version: in.Version, Step: in.Step, Status: in.Status, Queue: in.Queue,
			Priority: in.Priority, Attempt: in.Attempt, CorrelationKey: in.CorrelationKey, EligibleAt: in.EligibleAt,
			UpdatedAt: in.UpdatedAt, Error: in.Error,
		},
		Reaps: in.Reaps, ConcurrencyKey: in.ConcurrencyKey, RateLimit: in.RateLimit, Awaiting: in.Awaiting,
		AwaitDeadline: in.AwaitDeadline, LeaseOwner: in.LeaseOwner, LeaseExpiresAt: in.LeaseExpiresAt,
		State: in.State, Result: in.Result, InsertedAt: in.InsertedAt, FinishedAt: in.FinishedAt,
		InboxLen: in.InboxLen,
	}
	if in.CorrelationKey != "" {
		out.CorrelationScope = append([]durable.Status{}, in.CorrelationScope...) // never nil: [] is shown
	}
	if in.RateLimit != "" {
		out.RateLimitWeight = in.RateLimitWeight
	}
	for _, s := range in.Inbox {
		out.Inbox = append(out.Inbox, inspectedSignal{ID: s.ID, Name: s.Name, Payload: s.Payload, DedupKey: s.DedupKey, InsertedAt: s.InsertedAt})
	}
	return out
}
