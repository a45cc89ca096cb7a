package gitleaks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/airlock/airlock/secretscan/gitleaks"
)

const stripe = "stripe: sk_live_51H8sdfSDFsdf8sdf8SDF8sdf8sdfSDF"

// TestFindsOnItsLine: gitleaks' default rules find a Stripe key, on the
// line of the text it is on, and nothing in plain text.
func TestFindsOnItsLine(t *testing.T) {
	d := gitleaks.New()
	all, err := d.Find(context.Background(), []string{"func main() {}\n", "one\ntwo\n" + stripe + "\n"})
	if err != nil || len(all) != 2 {
		t.Fatalf("found %+v, %v; want an answer for each of 2 texts", all, err)
	}
	if got := all[1]; len(got) != 1 || got[0].Line != 3 || got[0].Rule != "stripe-access-token" || got[0].Description == "" {
		t.Fatalf("found %+v; want the Stripe key on line 3", got)
	}
	if len(all[0]) != 0 {
		t.Fatalf("plain code: %+v", all[0])
	}
}

// TestFirstUseConcurrent: the rules are compiled on the first Find;
// reviews that start together all wait for them and all find the secret
// (run it alone with -race: it is then the first use).
func TestFirstUseConcurrent(t *testing.T) {
	d := gitleaks.New()
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			all, err := d.Find(context.Background(), []string{fmt.Sprintf("line %d\n%s\n", i, stripe)})
			if err != nil || len(all) != 1 || len(all[0]) != 1 || all[0][0].Line != 2 {
				t.Errorf("scan %d: %+v, %v; want one secret on line 2", i, all, err)
			}
		}()
	}
	wg.Wait()
}

// TestCanceled: a Find whose context has ended does not scan.
func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gitleaks.New().Find(ctx, []string{stripe}); err == nil {
		t.Fatal("scanned under a canceled context")
	}
}

// TestWarm: rules compiled ahead are the ones Find uses.
func TestWarm(t *testing.T) {
	d := gitleaks.New()
	d.Warm()
	d.Warm() // twice is once
	if got, err := d.Find(context.Background(), []string{stripe}); err != nil || len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("after Warm: %+v, %v", got, err)
	}
}

// TestAnswersInOrder: texts are scanned longest first, and each answer
// is its own text's.
func TestAnswersInOrder(t *testing.T) {
	texts := make([]string, 40)
	for i := range texts {
		texts[i] = strings.Repeat("x\n", (i*7)%40) + stripe + "\n"
	}
	all, err := gitleaks.New().Find(context.Background(), texts)
	if err != nil || len(all) != len(texts) {
		t.Fatalf("found %d answers, %v", len(all), err)
	}
	for i, got := range all {
		if len(got) != 1 || got[0].Line != (i*7)%40+1 {
			t.Errorf("text %d: %+v, want the key on line %d", i, got, (i*7)%40+1)
		}
	}
}
