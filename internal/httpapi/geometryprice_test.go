package httpapi

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
)

// An answer with geometry costs by its size: charged the most such an
// answer costs up front (16 units in the compiled-in plans), it is settled
// down to a unit per 4 KiB of the body returned, rounded up; without
// geometry it costs one unit, as before. A plan none of whose limits can
// admit the price up front is a 422 naming geometry as what to leave out,
// and is charged nothing.
func TestContainsPricedBySize(t *testing.T) {
	const unitBytes, bound = 4096, 16
	for _, mode := range quotaModes {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, mode.opts(t)...)
			for _, c := range []struct {
				name, point string
				geometry    bool
			}{
				{"Luxembourg", "lng=6.13&lat=49.61", true},
				{"South Africa", "lng=25&lat=-30", true},
				{"Canada, 443 KiB", "lng=-100&lat=60", true},
				{"a county and its country", "lng=-77.04&lat=38.9", true},
				{"Canada without geometry", "lng=-100&lat=60", false},
			} {
				path := "/v1/geofence/contains?" + c.point
				if c.geometry {
					path += "&geometry=true"
				}
				before := e.used(t, key("pro")...)
				resp := e.get(t, path, key("pro")...)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: status %d: %s", c.name, resp.StatusCode, body)
				}
				upFront, want := int64(1), int64(1)
				if c.geometry {
					upFront, want = bound, min(bound, max(1, (int64(len(body))+unitBytes-1)/unitBytes))
				}
				settled := resp.Header.Get(headerSettledCost)
				if c.geometry && settled != strconv.FormatInt(want, 10) || !c.geometry && settled != "" {
					t.Errorf("%s (%d bytes): X-Quota-Settled-Cost %q, want %d", c.name, len(body), settled, want)
				}
				if got := resp.Header.Get("X-RateLimit-Cost"); got != strconv.FormatInt(upFront, 10) {
					t.Errorf("%s: X-RateLimit-Cost %q, want %d charged up front", c.name, got, upFront)
				}
				t.Logf("%s: %d bytes, %d units", c.name, len(body), want)
				after := e.used(t, key("pro")...)
				for i := range after {
					if after[i]-before[i] != want {
						t.Errorf("%s (%d bytes): used %v -> %v, want %d more in each limit", c.name, len(body), before, after, want)
						break
					}
				}
			}

			// "five" admits 5 units in any 10 s: never the 16 up front.
			before := e.used(t, key("five")...)
			var p problem
			resp := e.get(t, "/v1/geofence/contains?lng=6.13&lat=49.61&geometry=true", key("five")...)
			decode(t, resp, http.StatusUnprocessableEntity, &p)
			if p.Code != "cost-exceeds-plan" || p.Cost != bound || p.MaxCost != 5 || p.Field != "geometry" || resp.Header.Get(headerStatus) != statusRefused {
				t.Errorf("geometry over the plan: %+v, X-Quota-Status %q; want cost-exceeds-plan of %d naming geometry, refused", p, resp.Header.Get(headerStatus), bound)
			}
			if after := e.used(t, key("five")...); !slices.Equal(before, after) {
				t.Errorf("a 422 was charged: used %v -> %v", before, after)
			}
			expectStatus(t, e.get(t, "/v1/geofence/contains?lng=6.13&lat=49.61", key("five")...), http.StatusOK, "charged")
		})
	}
}
