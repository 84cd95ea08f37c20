package dataversion

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// versions is a read that answers what a test sets.
type versions struct {
	mu  sync.Mutex
	v   string
	err error
}

func (s *versions) set(v string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v, s.err = v, err
}

func (s *versions) read(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v, s.err
}

// eventually waits for w to hold want.
func eventually(t *testing.T, w *Watch, want string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); w.Current() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("version %q, want %q", w.Current(), want)
		}
	}
}

// A new version shows within the interval; a failed read keeps the one
// held; once ctx ends the watch reads no more.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := &versions{v: "v1"}
	w, err := Start(ctx, src.read, 5*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Current(); got != "v1" {
		t.Fatalf("first version %q, want v1", got)
	}
	src.set("v2", nil)
	eventually(t, w, "v2")
	src.set("", errors.New("database down"))
	time.Sleep(30 * time.Millisecond)
	if got := w.Current(); got != "v2" {
		t.Errorf("after failed reads %q, want v2 kept", got)
	}
	src.set("v3", nil)
	eventually(t, w, "v3")
	cancel()
	time.Sleep(30 * time.Millisecond) // a read under way ends
	src.set("v4", nil)
	time.Sleep(30 * time.Millisecond)
	if got := w.Current(); got != "v3" {
		t.Errorf("read %q after its context ended", got)
	}
}

// A first read that fails is Start's error: a server does not start
// without knowing its data's version.
func TestStartFails(t *testing.T) {
	src := &versions{err: errors.New("no data loaded")}
	if w, err := Start(context.Background(), src.read, time.Second, slog.New(slog.DiscardHandler)); err == nil {
		t.Errorf("Start = %v, nil; want the read's error", w)
	}
}

// A read slower than a short interval still lands: each is given at
// least minReadTime, not the interval.
func TestSlowReadLands(t *testing.T) {
	src := &versions{v: "v1"}
	slow := func(ctx context.Context) (string, error) {
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return src.read(ctx)
	}
	w, err := Start(t.Context(), slow, 5*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src.set("v2", nil)
	eventually(t, w, "v2")
}
