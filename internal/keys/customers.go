package keys

import "time"

// Customer is who several keys belong to: its plan is one budget that
// every request of any of its keys must fit, beside the key's own. It has
// no secret: its keys are what a client presents.
type Customer struct {
	ID   int64
	Name string
	// Plan names the customer's plan, checked by the caller against its
	// plans as a key's is.
	Plan      string
	CreatedAt time.Time
	// UpdatedAt is when the customer was last changed (created, renamed,
	// moved to another plan), by the store's clock.
	UpdatedAt time.Time
}

// utc is c with its times in UTC, as the stores return them.
func (c Customer) utc() Customer {
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return c
}
