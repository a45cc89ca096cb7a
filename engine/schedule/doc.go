// Package schedule runs agent turns and commands on a schedule: each
// occurrence of a schedule's cron expression becomes a new session over
// the project as it is then, whose result waits for review like any
// session's.
//
// A Scheduler keeps schedules and the log of their runs in a Store (the
// engine's SQLite), so they survive engine restarts. It looks at the wall
// clock at least once a minute, so that a machine that slept through an
// occurrence runs it when it wakes: once, however many were missed. A run
// that would overlap the schedule's last one, still running, is skipped
// and logged unless the schedule allows overlap. After a run, the
// schedule's on-done command runs on the host.
//
// It reaches the session core only through the interfaces declared here
// (Sessions, Store, Clock), so its tests run without Docker; it never
// imports package engine.
package schedule
