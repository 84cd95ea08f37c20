package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// lateRetriesMetric counts the charges a tileapi server tried again
// because Redis received them too late in their time budget to make them.
const lateRetriesMetric = "tileapi_quota_late_retries_total"

// readCounter reads the unlabelled counter name from the Prometheus
// metrics at url: -1 if the server has none of that name (a build before
// the counter, in a side-by-side run).
func readCounter(ctx context.Context, hc *http.Client, url, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("loadtest: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("loadtest: metrics: %s answered %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("loadtest: metrics: %s: %q", name, sc.Text())
			}
			return int64(f), nil
		}
	}
	return -1, sc.Err()
}
