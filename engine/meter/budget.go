package meter

import (
	"fmt"
	"time"
)

// Cost prices CPU time at a rate per core-hour.
func Cost(used time.Duration, perCoreHour float64) float64 {
	return used.Hours() * perCoreHour
}

// Budget is what a session may use before it pauses (zero fields: no
// limit).
type Budget struct {
	CPU  time.Duration
	Cost float64 // in USD
}

// Reached says in words which budget a session that used this much CPU
// has reached, at the given price ("" when none).
func (b Budget) Reached(used time.Duration, perCoreHour float64) string {
	if b.CPU > 0 && used >= b.CPU {
		return fmt.Sprintf("its CPU budget (%s used of %s)", used.Round(time.Second), b.CPU)
	}
	if cost := Cost(used, perCoreHour); b.Cost > 0 && cost >= b.Cost {
		return fmt.Sprintf("its cost budget ($%.4f of $%.2f)", cost, b.Cost)
	}
	return ""
}

// Set says whether any budget is set.
func (b Budget) Set() bool { return b.CPU > 0 || b.Cost > 0 }
