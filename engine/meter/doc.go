// Package meter measures what sessions use. It knows where Docker puts a
// session's cgroups on this host (the cgroupfs or the systemd driver, on
// cgroup v1 or v2, as `docker info` says), reads their CPU time and
// memory from the kernel's files, keeps a short CPU history per session
// for the idle watcher and the meter view, prices CPU time and says when
// a budget is reached.
//
// Every session gets a cgroup parent of its own, so its totals outlive
// any one container: the kernel keeps a parent's counts after a child
// cgroup is removed.
package meter
