package billing

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tileapi/tileapi/internal/param"
)

// Format is a way of writing events.
type Format string

// The formats.
const (
	// CloudEvents is a JSON array of CloudEvents 1.0 in structured mode
	// (application/cloudevents-batch+json), one event a line, as
	// OpenMeter's POST /api/v1/events takes a batch.
	CloudEvents Format = "cloudevents"
	// CSV is a header line and one line per event.
	CSV Format = "csv"
	// Stripe is one Stripe meter event a line (JSON Lines): event_name,
	// identifier, timestamp and payload, the body of POST
	// /v1/billing/meter_events. It sends the units as settled, and the
	// overage under an event name of its own.
	Stripe Format = "stripe"
)

// formats are the formats by name.
var formats = []Format{CloudEvents, CSV, Stripe}

// ParseFormat returns the format named s; the error is a *param.Error
// naming "format".
func ParseFormat(s string) (Format, error) {
	for _, f := range formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", param.Invalid("format", "must be cloudevents, csv or stripe")
}

// Settled says whether the format sends one settled event per row rather
// than usage and adjustment events: Stripe's meters sum values that are
// whole numbers and cancel an event by its identifier rather than taking
// a negative one.
func (f Format) Settled() bool { return f == Stripe }

// ContentType is the media type of f.
func (f Format) ContentType() string {
	switch f {
	case CloudEvents:
		return "application/cloudevents-batch+json"
	case CSV:
		return "text/csv; charset=utf-8"
	default:
		return "application/jsonl"
	}
}

// Defaults of Options.
const (
	DefaultSource           = "/tileapi/usage"
	DefaultEventName        = "tileapi_units"
	DefaultOverageEventName = "tileapi_overage_units"
)

// The CloudEvents types: one of the units (usage and adjustments, which
// a meter sums), one of the overage, a split of them that a meter of
// the units must not add.
const (
	DefaultType = "com.tileapi.usage"
	OverageType = "com.tileapi.usage.overage"
)

// Options name what the formats put in every event; a zero field takes
// its default.
type Options struct {
	// Source is the CloudEvents source, which with the id makes an event
	// unique: keep it the same from one export to the next.
	Source string
	// EventName is the Stripe meter's event_name.
	EventName string
	// OverageEventName is the event_name of the Stripe meter of the
	// overage.
	OverageEventName string
}

// Write writes events in format f to w.
func Write(w io.Writer, f Format, events []Event, o Options) error {
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.EventName == "" {
		o.EventName = DefaultEventName
	}
	if o.OverageEventName == "" {
		o.OverageEventName = DefaultOverageEventName
	}
	bw := bufio.NewWriter(w)
	var err error
	switch f {
	case CloudEvents:
		err = writeCloudEvents(bw, events, o.Source)
	case CSV:
		err = writeCSV(bw, events)
	case Stripe:
		err = writeStripe(bw, events, o.EventName, o.OverageEventName)
	default:
		err = fmt.Errorf("billing: unknown format %q", f)
	}
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("billing: write: %w", err)
	}
	return nil
}

// cloudEvent is a CloudEvents 1.0 event in the JSON format (structured
// mode), its data the event's fields.
type cloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            eventData `json:"data"`
}

// eventData is the data of a CloudEvent.
type eventData struct {
	Kind       Kind   `json:"kind"`
	Period     string `json:"period"`
	Identity   string `json:"identity"`
	KeyID      int64  `json:"key_id"`
	CustomerID *int64 `json:"customer_id"` // null for a key without a customer
	Route      string `json:"route"`
	Layer      string `json:"layer"`
	Units      int64  `json:"units"`
}

func writeCloudEvents(w *bufio.Writer, events []Event, source string) error {
	w.WriteString("[")
	for i, e := range events {
		var customer *int64
		if e.CustomerID != 0 {
			customer = &e.CustomerID
		}
		typ := DefaultType
		if e.Kind == Overage {
			typ = OverageType
		}
		b, err := json.Marshal(cloudEvent{
			SpecVersion: "1.0", ID: e.ID, Source: source, Type: typ, Subject: e.Subject(),
			Time: e.Start, DataContentType: "application/json",
			Data: eventData{Kind: e.Kind, Period: e.Period, Identity: e.Identity, KeyID: e.KeyID, CustomerID: customer, Route: e.Route, Layer: e.Layer, Units: e.Units},
		})
		if err != nil {
			return fmt.Errorf("billing: cloudevents: %w", err)
		}
		if i > 0 {
			w.WriteString(",")
		}
		w.WriteString("\n")
		w.Write(b)
	}
	w.WriteString("\n]\n")
	return nil
}

// csvHeader names the columns of the CSV format.
var csvHeader = []string{"id", "kind", "period", "start", "subject", "identity", "key_id", "customer_id", "route", "layer", "units"}

func writeCSV(w *bufio.Writer, events []Event) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for _, e := range events {
		customer := ""
		if e.CustomerID != 0 {
			customer = strconv.FormatInt(e.CustomerID, 10)
		}
		cw.Write([]string{e.ID, string(e.Kind), e.Period, e.Start.Format(time.RFC3339), e.Subject(), e.Identity,
			strconv.FormatInt(e.KeyID, 10), customer, e.Route, e.Layer, strconv.FormatInt(e.Units, 10)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("billing: csv: %w", err)
	}
	return nil
}

// stripeEvent is the body of a Stripe meter event (POST
// /v1/billing/meter_events), as JSON.
type stripeEvent struct {
	EventName  string        `json:"event_name"`
	Identifier string        `json:"identifier"`
	Timestamp  int64         `json:"timestamp"` // seconds since the Unix epoch
	Payload    stripePayload `json:"payload"`
}

// stripePayload is a meter event's payload: Stripe's values are strings.
// stripe_customer_id holds our subject ("customer:7"), to be mapped to the
// Stripe customer (cus_...) by the sender; route and layer can be a
// meter's dimensions.
type stripePayload struct {
	StripeCustomerID string `json:"stripe_customer_id"`
	Value            string `json:"value"`
	Route            string `json:"route"`
	Layer            string `json:"layer"`
}

func writeStripe(w *bufio.Writer, events []Event, name, overageName string) error {
	enc := json.NewEncoder(w)
	for _, e := range events {
		meter := name
		if e.Kind == Overage {
			meter = overageName
		}
		err := enc.Encode(stripeEvent{EventName: meter, Identifier: e.ID, Timestamp: e.Start.Unix(),
			Payload: stripePayload{StripeCustomerID: e.Subject(), Value: strconv.FormatInt(e.Units, 10), Route: e.Route, Layer: e.Layer}})
		if err != nil {
			return fmt.Errorf("billing: stripe: %w", err)
		}
	}
	return nil
}
