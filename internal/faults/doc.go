// Package faults is tileapi's fault suite; it has tests only.
//
// Each test starts real `tileapi serve` processes against a Redis of its
// own and the test PostgreSQL, each reached through an
// quota/quotatest/faultproxy, drives them with concurrent clients, and while they
// run makes Redis die, hang, slow down, restart, run out of memory, lose
// its scripts or fail over, kills one of the servers, or makes PostgreSQL
// die or hang; then lifts the fault. Apart, it restarts Redis under the
// usage ledger with a month limit, and checks what the month keeps. For every fault,
// with the servers failing open and failing closed, it checks that the
// slowest request stayed within the time budget, that every status is the
// one the failure policy names, that the quota charged exactly the
// responses served as charged, and that the servers recover without a
// restart.
//
//	go test -v ./faults/    # prints a table of fault -> observed behaviour
package faults
