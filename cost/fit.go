package cost

import "fmt"

// Sample is one request measured for calibration: its price up front, the
// time its query took and the features it returned.
type Sample struct {
	Route    string
	Price    int64
	MS       float64
	Features int
}

// FitWork returns the work model whose price of each sample's work is
// closest to its price up front, in least squares, with neither rate
// negative: the exchange rate between measured work and units that the
// price list implies. Settling with it then charges a request what its
// work cost, at the rate of the prices, never more than its price. Its one
// error: no sample took measurable time, so there is nothing to fit.
func FitWork(samples []Sample) (WorkModel, error) {
	// Normal equations of price ~ a*ms + b*features, without intercept.
	var mm, mf, ff, pm, pf float64
	for _, s := range samples {
		f := float64(s.Features)
		mm += s.MS * s.MS
		mf += s.MS * f
		ff += f * f
		pm += float64(s.Price) * s.MS
		pf += float64(s.Price) * f
	}
	if mm == 0 {
		return WorkModel{}, fmt.Errorf("cost: fit: no sample took measurable time (%d samples)", len(samples))
	}
	det := mm*ff - mf*mf
	if det != 0 {
		a, b := (pm*ff-pf*mf)/det, (pf*mm-pm*mf)/det
		if a >= 0 && b >= 0 {
			return WorkModel{PerMS: a, PerFeature: b}, nil
		}
	}
	// One rate would be negative: the best fit has it at zero.
	byMS := WorkModel{PerMS: pm / mm}
	if ff == 0 || residual(samples, byMS) <= residual(samples, WorkModel{PerFeature: pf / ff}) {
		return byMS, nil
	}
	return WorkModel{PerFeature: pf / ff}, nil
}

func residual(samples []Sample, w WorkModel) float64 {
	var sum float64
	for _, s := range samples {
		d := float64(s.Price) - w.PerMS*s.MS - w.PerFeature*float64(s.Features)
		sum += d * d
	}
	return sum
}
