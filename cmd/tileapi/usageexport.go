package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tileapi/tileapi/internal/billing"
	"github.com/tileapi/tileapi/internal/param"
)

// runUsageExport writes the usage of the closed hours of a range as
// events for a billing system (see package billing), to -o or stdout.
func runUsageExport(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("usage export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := databaseFlag(fs, getenv)
	from := fs.String("from", "", "start of the range, included: an RFC 3339 `time` on the hour, or a date (required)")
	to := fs.String("to", "", "end of the range, excluded: an RFC 3339 `time` on the hour, or a date (default and at most: the end of the last closed hour)")
	format := fs.String("format", string(billing.CloudEvents), "cloudevents (a JSON array, one event a line), csv, or stripe (a meter event a line)")
	out := fs.String("o", "", "write to this `file` (default: stdout)")
	grace := fs.Duration("grace", billing.DefaultGrace, "an hour is closed, and exported, this long after it ends")
	key := fs.Int64("key", 0, "only this key's `ID` (default: every key)")
	customer := fs.Int64("customer", 0, "only the keys of this customer `ID` (default: every customer)")
	var o billing.Options
	fs.StringVar(&o.Source, "source", billing.DefaultSource, "the CloudEvents source: keep it the same from one export to the next")
	fs.StringVar(&o.EventName, "event-name", billing.DefaultEventName, "the Stripe meter's event_name")
	fs.StringVar(&o.OverageEventName, "overage-event-name", billing.DefaultOverageEventName, "the event_name of the Stripe meter of the units past a soft cap")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage export: unexpected argument %q", fs.Arg(0))
	}
	f, err := billing.ParseFormat(*format)
	if err != nil {
		return flagError(err)
	}
	q, err := billing.ParseQuery(*from, *to, time.Now(), *grace)
	if err != nil {
		return flagError(err)
	}
	if *key < 0 || *customer < 0 {
		return errors.New("usage export: -key and -customer are positive ids")
	}
	q.KeyID, q.CustomerID = *key, *customer
	pool, _, err := connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("usage export: %w", err)
	}
	defer pool.Close()
	events, err := billing.NewPostgres(pool).Events(ctx, q, f.Settled())
	if err != nil {
		return fmt.Errorf("usage export: %w", err)
	}
	if err := writeExport(*out, stdout, f, events, o); err != nil {
		return fmt.Errorf("usage export: %w", err)
	}
	_, err = fmt.Fprintf(stderr, "usage export: %d events of [%s, %s)\n", len(events), q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	return err
}

// flagError says which flag a *param.Error is about, in one line.
func flagError(err error) error {
	var pe *param.Error
	if errors.As(err, &pe) {
		return fmt.Errorf("usage export: invalid -%s: %s", pe.Field, pe.Reason)
	}
	return fmt.Errorf("usage export: %w", err)
}

// writeExport writes events to the file path, or to stdout if it is
// empty. A file is written beside its name and renamed, so a failed
// export leaves no half file under it.
func writeExport(path string, stdout io.Writer, f billing.Format, events []billing.Event, o billing.Options) error {
	if path == "" {
		return billing.Write(stdout, f, events, o)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".usage-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := billing.Write(tmp, f, events, o); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
