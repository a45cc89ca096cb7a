package review

import (
	"fmt"
	"sync"
	"testing"
)

// TestSecretScanFirstUseConcurrent: the detector is made on the first scan;
// reviews that start together all wait for the one detector and all find
// the secret (run it alone with -race: it is then the first use).
func TestSecretScanFirstUseConcurrent(t *testing.T) {
	const n = 8
	var wg sync.WaitGroup
	found := make([][]Finding, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i], errs[i] = secrets(fmt.Sprintf("line %d\nstripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF\n", i))
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(found[i]) != 1 || found[i][0].Line != 2 || found[i][0].Scanner != "secrets" {
			t.Errorf("scan %d: %+v, %v; want one secret on line 2", i, found[i], errs[i])
		}
	}
}
