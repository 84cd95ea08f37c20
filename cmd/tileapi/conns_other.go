//go:build !unix

package main

import "errors"

// fileLimit is unknown here.
func fileLimit() (int, error) {
	return 0, errors.New("the open-file limit is not known on this system")
}
