package secretscan_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/airlock/airlock/secretscan"
)

// recording is a Finder that records what it was asked, and finds
// SECRET as fakeFinder does.
type recording struct {
	asked [][]string
	fail  bool
}

func (r *recording) Find(ctx context.Context, texts []string) ([][]secretscan.Match, error) {
	r.asked = append(r.asked, slices.Clone(texts))
	if r.fail {
		return nil, errors.New("cannot look")
	}
	return fakeFinder{}.Find(ctx, texts)
}

// TestCacheAsksOnce: a text asked about again is answered from the
// cache, the same answer; a batch that mixes kept and new texts sends
// only the new ones, in one Find; an answer that failed is not kept.
func TestCacheAsksOnce(t *testing.T) {
	r := &recording{}
	c := secretscan.NewCache(r, secretscan.CacheOptions{})
	ctx := context.Background()
	first, err := c.Find(ctx, []string{"a\nSECRET\n", "plain\n"})
	if err != nil || len(first) != 2 || len(first[0]) != 1 || first[0][0].Line != 2 || len(first[1]) != 0 {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := c.Find(ctx, []string{"plain\n", "new\n", "a\nSECRET\n"})
	if err != nil || len(again) != 3 || len(again[2]) != 1 || again[2][0].Line != 2 || len(again[0])+len(again[1]) != 0 {
		t.Fatalf("again: %+v, %v", again, err)
	}
	if len(r.asked) != 2 || !slices.Equal(r.asked[1], []string{"new\n"}) {
		t.Fatalf("asked %q; want the new text alone the second time", r.asked)
	}
	if _, err := c.Find(ctx, []string{"plain\n", "a\nSECRET\n", "new\n"}); err != nil || len(r.asked) != 2 {
		t.Fatalf("a third review of the same texts asked %d times, %v", len(r.asked), err)
	}
	r.fail = true
	if _, err := c.Find(ctx, []string{"other\n"}); err == nil {
		t.Fatal("a failed answer came back as one")
	}
	r.fail = false
	if _, err := c.Find(ctx, []string{"other\n"}); err != nil || len(r.asked) != 4 {
		t.Fatalf("after a failure the text was not asked again (%d asks, %v)", len(r.asked), err)
	}
}

// TestCacheBounded: the cache keeps at most MaxTexts texts, and what it
// let go is asked again.
func TestCacheBounded(t *testing.T) {
	r := &recording{}
	c := secretscan.NewCache(r, secretscan.CacheOptions{MaxTexts: 100})
	for i := range 1000 {
		if _, err := c.Find(context.Background(), []string{fmt.Sprint("text ", i)}); err != nil {
			t.Fatal(err)
		}
		if c.Len() > 100 {
			t.Fatalf("%d texts kept, over the bound of 100", c.Len())
		}
	}
	c.Find(context.Background(), []string{"text 0"})
	if len(r.asked) != 1001 {
		t.Fatalf("a text let go long ago was not asked again (%d asks)", len(r.asked))
	}
	b := secretscan.NewCache(r, secretscan.CacheOptions{MaxBytes: 10 << 10})
	for i := range 1000 {
		b.Find(context.Background(), []string{fmt.Sprint("SECRET ", i)})
	}
	if b.Len() > 10<<10/96 {
		t.Fatalf("%d texts kept in 10 KiB", b.Len())
	}
}
