package server

import (
	"bufio"
	"net/http"
	"net/http/pprof"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock/airlock/engine/api"
)

// For the people who run an engine for a team or in CI, the TCP listener
// also serves, behind its token like everything else there:
//
//   - GET /metrics: the engine's numbers in Prometheus's text format
//     (version 0.0.4): sessions by state, each session's CPU seconds,
//     memory and egress bytes, and how long diffs, patches, accepts and
//     discards take, as histograms. Written here by hand: the client
//     library would bring 44 packages (29 of them protobuf's) into the
//     engine for a page of text.
//   - /debug/pprof/: Go's profiler (net/http/pprof's handlers, served
//     from this handler only: its registration on http.DefaultServeMux
//     is served by nothing in Airlock).

// opsPath says whether a path is one of these.
func opsPath(p string) bool {
	return p == "/metrics" || p == "/debug/pprof" || strings.HasPrefix(p, "/debug/pprof/")
}

// opsHandler serves /metrics and /debug/pprof/.
func (s *Server) opsHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /metrics", s.metrics)
	m.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles below it
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// reviewOps are the review calls whose durations /metrics shows.
var reviewOps = []string{"diff", "patch", "accept", "discard"}

// latencyBuckets are the histograms' upper bounds, in seconds: a diff of
// a small change takes milliseconds, an accept of a large one seconds.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// latencies are the durations of review calls, by call.
type latencies struct {
	mu  sync.Mutex
	ops map[string]*histogram
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; one more for +Inf
	sum    float64
}

func (l *latencies) observe(op string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops = map[string]*histogram{}
	}
	h := l.ops[op]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		l.ops[op] = h
	}
	i, _ := slices.BinarySearch(latencyBuckets, d.Seconds()) // first bound >= d
	h.counts[i]++
	h.sum += d.Seconds()
}

// timed serves h, counting how long it took under op.
func (s *Server) timed(op string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { s.latency.observe(op, time.Since(start)) }()
		h(w, r)
	}
}

// sessionStates are listed even when no session is in them, so that a
// dashboard sees a zero rather than no data.
var sessionStates = []string{api.StateCreating, api.StateRunning, api.StatePaused, api.StateHibernated, api.StateStopped, api.StateFailed}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	use, err := s.eng.Usage(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	p := promWriter{w: bufio.NewWriter(w)}
	defer p.w.Flush()

	p.family("airlock_engine_info", "gauge", "The engine's version and API level.")
	p.sample("airlock_engine_info", 1, "version", s.version.Engine, "api", s.version.API)

	states := map[string]int{}
	for _, st := range sessionStates {
		states[st] = 0
	}
	for _, u := range use {
		states[u.State]++
	}
	p.family("airlock_sessions", "gauge", "Sessions by state.")
	for _, st := range sortedKeys(states) {
		p.sample("airlock_sessions", float64(states[st]), "state", st)
	}

	p.family("airlock_session_cpu_seconds_total", "counter", "CPU time a session's processes used, from its cgroup.")
	for _, u := range use {
		p.sample("airlock_session_cpu_seconds_total", u.CPU.Seconds(), "session", u.ID)
	}
	p.family("airlock_session_memory_bytes", "gauge", "Memory a session holds now, its workspace's tmpfs included.")
	for _, u := range use {
		if u.Memory.Current > 0 {
			p.sample("airlock_session_memory_bytes", float64(u.Memory.Current), "session", u.ID)
		}
	}
	p.family("airlock_session_memory_peak_bytes", "gauge", "The most memory a session held.")
	for _, u := range use {
		if u.Memory.Peak > 0 {
			p.sample("airlock_session_memory_peak_bytes", float64(u.Memory.Peak), "session", u.ID)
		}
	}
	p.family("airlock_session_egress_bytes_total", "counter", "Bytes through a session's egress proxy, out (sent) and in (received).")
	for _, u := range use {
		p.sample("airlock_session_egress_bytes_total", float64(u.EgressOut), "session", u.ID, "direction", "out")
		p.sample("airlock_session_egress_bytes_total", float64(u.EgressIn), "session", u.ID, "direction", "in")
	}

	p.family("airlock_review_duration_seconds", "histogram", "How long review calls took to answer (a patch: to stream whole).")
	s.latency.mu.Lock()
	for _, op := range reviewOps {
		h := s.latency.ops[op]
		if h == nil {
			h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		}
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			p.sample("airlock_review_duration_seconds_bucket", float64(cum), "op", op, "le", formatFloat(le))
		}
		cum += h.counts[len(latencyBuckets)]
		p.sample("airlock_review_duration_seconds_bucket", float64(cum), "op", op, "le", "+Inf")
		p.sample("airlock_review_duration_seconds_sum", h.sum, "op", op)
		p.sample("airlock_review_duration_seconds_count", float64(cum), "op", op)
	}
	s.latency.mu.Unlock()

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.family("go_goroutines", "gauge", "Goroutines of the engine.")
	p.sample("go_goroutines", float64(runtime.NumGoroutine()))
	p.family("go_memstats_heap_inuse_bytes", "gauge", "The engine's heap in use.")
	p.sample("go_memstats_heap_inuse_bytes", float64(ms.HeapInuse))
}

// promWriter writes Prometheus's text format.
type promWriter struct{ w *bufio.Writer }

func (p promWriter) family(name, typ, help string) {
	p.w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one line; labels are name, value pairs.
func (p promWriter) sample(name string, v float64, labels ...string) {
	p.w.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		p.w.WriteString(sep + labels[i] + `="` + labelEscaper.Replace(labels[i+1]) + `"`)
	}
	if len(labels) > 0 {
		p.w.WriteString("}")
	}
	p.w.WriteString(" " + formatFloat(v) + "\n")
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
