package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	for _, tc := range []struct {
		name, url, err string
	}{
		{"healthy", ok.URL, ""},
		{"unhealthy", down.URL, "503"},
		{"nothing listening", "http://127.0.0.1:1/healthz", "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"tileapi", "healthcheck", "-url", tc.url}, func(string) string { return "" }, &stdout, &stderr)
			if tc.err == "" {
				if err != nil || stdout.String() != "ok\n" {
					t.Fatalf("err %v, stdout %q; want nil and ok", err, stdout.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want one containing %q", err, tc.err)
			}
		})
	}
}
