package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
)

// A tree object is JSON ({"e":[entry, ...]}), and one directory of
// 200,000 names is one object of some 40 MB. Neither writing nor reading
// one holds its bytes whole: a tree is encoded entry by entry into the
// store's temporary file as it is hashed (json.Marshal of the whole tree
// grew a buffer to twice its size), and read in two passes of a bounded
// buffer: the first checks its digest and counts its entries, the second
// decodes them one at a time. What a tree costs in memory is then its
// decoded entries alone, and the bytes stay those json.Marshal wrote, so
// every tree keeps its digest.

// writeTree writes t as json.Marshal(t) would.
func writeTree(w io.Writer, t *tree) error {
	if t.Entries == nil {
		if t.Parts == nil {
			_, err := io.WriteString(w, `{"e":null}`)
			return err
		}
		data, err := json.Marshal(t.Parts)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, `{"e":null,"p":%s}`, data)
		return err
	}
	if _, err := io.WriteString(w, `{"e":[`); err != nil {
		return err
	}
	for i := range t.Entries {
		data, err := json.Marshal(&t.Entries[i])
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `]}`)
	return err
}

func encodeTree(t *tree) ([]byte, error) {
	var b bytes.Buffer
	err := writeTree(&b, t)
	return b.Bytes(), err
}

// spillAt is the size up to which a tree is encoded in memory (most
// directories): a larger one goes on into a temporary file.
const spillAt = 256 << 10

// treeWriter hashes what is written, keeps it in memory up to spillAt,
// and past it writes to a temporary file of the store.
type treeWriter struct {
	dir string
	h   hash.Hash
	n   int64
	mem []byte
	f   *os.File
	bw  *bufio.Writer
}

func (w *treeWriter) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.n += int64(len(p))
	if w.f == nil {
		if len(w.mem)+len(p) <= spillAt {
			w.mem = append(w.mem, p...)
			return len(p), nil
		}
		f, err := os.CreateTemp(w.dir, "obj-*")
		if err != nil {
			return 0, err
		}
		w.f, w.bw = f, bufio.NewWriterSize(f, spillAt)
		if _, err := w.bw.Write(w.mem); err != nil {
			return 0, err
		}
		w.mem = nil
	}
	return w.bw.Write(p)
}

// putTree stores the tree t and returns its digest.
func (r *recorder) putTree(t *tree) (string, error) {
	w := &treeWriter{dir: r.s.tmpDir(), h: sha256.New()}
	err := writeTree(w, t)
	if w.f == nil {
		if err != nil {
			return "", err
		}
		return r.putAs(digestOf(w.h), w.mem)
	}
	if err == nil {
		err = w.bw.Flush()
	}
	digest := digestOf(w.h)
	if err == nil && r.has(digest) {
		err = errStored
	}
	if err != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		if err == errStored {
			return digest, nil
		}
		return "", err
	}
	r.stats.BytesWritten += w.n
	return digest, r.add(w.f, digest)
}

var errStored = errors.New("stored already")

// treeMark begins every entry's JSON (a name holding the same bytes is
// escaped): counting it sizes a tree's list once, where growing it while
// decoding made garbage of twice its size.
var treeMark = []byte(`{"n":`)

// readTree loads a tree object, checking its digest.
func (s *Store) readTree(digest string) (*tree, error) {
	if t, ok := s.trees[digest]; ok {
		return t, nil
	}
	p, err := s.objectPath(digest)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: tree %s is missing", ErrCorrupt, digest)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, sum, err := scanTree(f)
	if err != nil {
		return nil, err
	}
	if "sha256:"+hex.EncodeToString(sum) != digest {
		return nil, fmt.Errorf("%w: tree %s does not match its digest", ErrCorrupt, digest)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	t, err := decodeTree(f, n)
	if err != nil {
		return nil, fmt.Errorf("%w: tree %s: %v", ErrCorrupt, digest, err)
	}
	if !t.inOrder() || !t.partsInOrder() {
		return nil, fmt.Errorf("%w: tree %s is not in name order", ErrCorrupt, digest)
	}
	return t, nil
}

// scanTree hashes a tree object and counts its entries.
func scanTree(r io.Reader) (entries int, sum []byte, err error) {
	h := sha256.New()
	keep := len(treeMark) - 1 // a mark across two reads is counted once
	buf := make([]byte, keep+256<<10)
	have := 0
	for {
		m, err := r.Read(buf[have:])
		h.Write(buf[have : have+m])
		entries += bytes.Count(buf[:have+m], treeMark)
		have += m
		if have > keep {
			copy(buf, buf[have-keep:have])
			have = keep
		}
		if err == io.EOF {
			return entries, h.Sum(nil), nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

// decodeTree decodes a tree object one entry at a time; n sizes its list.
func decodeTree(r io.Reader, n int) (*tree, error) {
	dec := json.NewDecoder(r)
	expect := func(want json.Token) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if tok != want {
			return fmt.Errorf("%v where %v was expected", tok, want)
		}
		return nil
	}
	if err := expect(json.Delim('{')); err != nil {
		return nil, err
	}
	if err := expect("e"); err != nil {
		return nil, err
	}
	t := &tree{}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case nil:
		if !dec.More() {
			break
		}
		if err := expect("p"); err != nil {
			return nil, err
		}
		if err := dec.Decode(&t.Parts); err != nil {
			return nil, err
		}
		if t.Parts == nil {
			return nil, fmt.Errorf("no parts listed")
		}
	case json.Delim('['):
		t.Entries = make([]Entry, 0, n)
		for dec.More() {
			t.Entries = append(t.Entries, Entry{})
			if err := dec.Decode(&t.Entries[len(t.Entries)-1]); err != nil {
				return nil, err
			}
		}
		if err := expect(json.Delim(']')); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%v where a list was expected", tok)
	}
	if err := expect(json.Delim('}')); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the tree")
	}
	return t, nil
}
