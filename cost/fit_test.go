package cost

import (
	"math"
	"testing"
)

func TestFitWork(t *testing.T) {
	// Prices made by a known model are recovered.
	var samples []Sample
	for i := range 50 {
		ms, f := float64(i%7)+0.5, i%11
		samples = append(samples, Sample{Price: int64(math.Round(3*ms + 0.5*float64(f))), MS: ms, Features: f})
	}
	w, err := FitWork(samples)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(w.PerMS-3) > 0.1 || math.Abs(w.PerFeature-0.5) > 0.1 {
		t.Errorf("fit %+v, want about 3 per ms and 0.5 per feature", w)
	}
	// Features that cheapen a request cannot get a negative rate.
	w, err = FitWork([]Sample{{Price: 10, MS: 10, Features: 50}, {Price: 20, MS: 20, Features: 1}, {Price: 5, MS: 5, Features: 40}})
	if err != nil || w.PerMS < 0 || w.PerFeature < 0 {
		t.Errorf("fit %+v, %v: want no negative rate", w, err)
	}
	if _, err := FitWork([]Sample{{Price: 1}}); err == nil {
		t.Error("a fit of no measured time succeeded")
	}
}
