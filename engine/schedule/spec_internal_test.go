package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
)

// TestLastDue: the latest occurrence missed, whether one or many were, and
// fast however long the machine slept.
func TestLastDue(t *testing.T) {
	friday0600 := time.Date(2026, 11, 20, 6, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		name  string
		cron  string
		from  time.Time
		now   time.Time
		want  time.Time
		wantN int
	}{
		{"none yet", "0 6 * * 1-5", friday0600, friday0600.Add(time.Hour), time.Time{}, 0},
		{"one", "0 6 * * 1-5", friday0600, friday0600.AddDate(0, 0, 3).Add(time.Minute), friday0600.AddDate(0, 0, 3), 1},
		{"a week asleep", "0 6 * * 1-5", friday0600, friday0600.AddDate(0, 0, 7).Add(time.Hour), friday0600.AddDate(0, 0, 7), 2},
		{"a year asleep, every second", "@every 1s", friday0600, friday0600.AddDate(1, 0, 0).Add(500 * time.Millisecond), friday0600.AddDate(1, 0, 0), 2},
		{"yearly, years asleep", "0 0 1 1 *", friday0600, friday0600.AddDate(5, 0, 0), time.Date(2031, 1, 1, 0, 0, 0, 0, time.Local), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(tc.cron)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			got, n := lastDue(spec, tc.from, tc.now)
			if !got.Equal(tc.want) || n != tc.wantN {
				t.Errorf("lastDue = %v, %d; want %v, %d", got, n, tc.want, tc.wantN)
			}
			if d := time.Since(t0); d > 50*time.Millisecond {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestCheckNames: a name is up to 64 letters, digits, '.', '_' or '-',
// starting with a letter or digit.
func TestCheckNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"nightly": true, "a.b_c-1": true, strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false, "": false, "-x": false, ".x": false, "a b": false, "é": false, "a\n": false,
	} {
		err := check(api.Schedule{Name: name, Cron: "@daily", Project: t.TempDir(), Command: []string{"true"}})
		if ok != (err == nil) || (err != nil && !errdefs.IsInvalid(err)) {
			t.Errorf("check(name %q): %v, want ok=%v", name, err, ok)
		}
	}
}
