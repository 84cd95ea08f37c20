package quota

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Slot is one of an identity's in-flight slots, for a charge to take in
// its own script (Redis.ChargeHolding): the charge is made only if a slot
// is free, and the slot is taken only if the charge is admitted. Package
// inflight makes them (inflight.Redis.Hold) and gives them back; the slot
// is a lease, held until it ends unless renewed.
type Slot struct {
	// Key is the identity's leases, a sorted set of lease ids scored by
	// when each ends (milliseconds of Redis TIME). On a Redis Cluster it
	// must be in the hash slot of the identity's log.
	Key string
	// ID names the lease taken, uniquely across servers.
	ID string
	// Max is the most leases the identity may hold at once, at least one.
	Max int
	// Lease is how long the lease lasts unless renewed, at least a
	// millisecond.
	Lease time.Duration
	// Release are leases of the identity to give back first, whatever the
	// decision: releases this process owes.
	Release []string
}

// ErrSlotsHeld is matched by a *SlotsHeldError.
var ErrSlotsHeld = errors.New("quota: every in-flight slot is held")

// SlotsHeldError reports a charge that was to take an in-flight slot
// (Slot) when every one was held: nothing was charged or taken.
type SlotsHeldError struct {
	// Max is the identity's slots, all held.
	Max int
	// Expires is how long until the first held lease ends if nobody gives
	// it back: an upper bound on the wait, as one usually comes back
	// sooner.
	Expires time.Duration
}

func (e *SlotsHeldError) Error() string {
	return fmt.Sprintf("quota: all %d in-flight slots are held", e.Max)
}

// Is makes errors.Is(err, ErrSlotsHeld) match.
func (e *SlotsHeldError) Is(target error) bool { return target == ErrSlotsHeld }

// check reports a slot the script could not take.
func (s *Slot) check() error {
	if s != nil && (s.Key == "" || s.ID == "" || s.Max < 1 || s.Lease < time.Millisecond) {
		return fmt.Errorf("%w: slot of key %q, id %q, max %d, lease %v", ErrInvalid, s.Key, s.ID, s.Max, s.Lease)
	}
	return nil
}

// args adds the slot to the charge's first arguments, as charge.lua reads
// them: its numbers (the most slots, the lease in milliseconds and the
// number of leases to give back, packed doubles) to call, the charge's
// packed numbers; then the new lease's id and those to give back, and its
// key first in keys. Without a slot, call goes alone.
func (s *Slot) args(keys []string, args []any, call []byte) ([]string, []any) {
	if s == nil {
		return keys, append(args, string(call))
	}
	for _, v := range []int64{int64(s.Max), s.Lease.Milliseconds(), int64(len(s.Release))} {
		call = binary.BigEndian.AppendUint64(call, math.Float64bits(float64(v)))
	}
	args = append(args, string(call), s.ID)
	for _, id := range s.Release {
		args = append(args, id)
	}
	return append(keys, s.Key), args
}

// held reads the script's slotReply: every slot of s is held.
func (s *Slot) held(reply string) error {
	if len(reply) != len(slotReply)+8 {
		return fmt.Errorf("quota: charge: script returned %d bytes after %q, want 8", len(reply)-len(slotReply), slotReply)
	}
	ms := header(reply[len(slotReply):]).field(1)
	return &SlotsHeldError{Max: s.Max, Expires: time.Duration(ms) * time.Millisecond}
}
