// Package faults is tileapi's fault suite; it has tests only.
//
// Each test starts real `tileapi serve` processes against a Redis of its
// own and the test PostgreSQL, each reached through an
// internal/faultproxy, drives them with concurrent clients, and while they
// run makes Redis die, hang, slow down, restart, lose its scripts or fail
// over, or PostgreSQL die or hang; then lifts the fault. For every fault,
// with the servers failing open and failing closed, it checks that the
// slowest request stayed within the time budget, that every status is the
// one the failure policy names, that the quota charged exactly the
// responses served as charged, and that the servers recover without a
// restart.
//
//	go test -v ./faults/    # prints a table of fault -> observed behaviour
package faults
