package confined

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Xattrs reads the extended attributes of the open file fd (a descriptor
// from OpenFd, OpenDir's Fd or OpenWritable: reading through a descriptor
// never follows a symlink) whose names keep accepts (nil keeps all).
// Names and values together may take at most max bytes (max <= 0: no
// limit); more is an error wrapping ErrTooLarge. A file system without
// extended attributes has none.
func Xattrs(fd int, keep func(name string) bool, max int) (map[string]string, error) {
	names, err := listXattrs(fd)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	total := 0
	for _, name := range names {
		if keep != nil && !keep(name) {
			continue
		}
		v, err := getXattr(fd, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s: %w", name, err)
		}
		if total += len(name) + len(v); max > 0 && total > max {
			return nil, fmt.Errorf("%w: extended attributes of more than %d bytes", ErrTooLarge, max)
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = string(v)
	}
	return out, nil
}

// Xattrs reads the extended attributes of the root directory itself; see
// the function Xattrs.
func (r *Root) Xattrs(keep func(name string) bool, max int) (map[string]string, error) {
	return Xattrs(r.fd, keep, max)
}

func listXattrs(fd int) ([]string, error) {
	for {
		size, err := unix.Flistxattr(fd, nil)
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Flistxattr(fd, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew since the size was asked
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if s != "" {
				names = append(names, s)
			}
		}
		return names, nil
	}
}

func getXattr(fd int, name string) ([]byte, error) {
	for {
		size, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Fgetxattr(fd, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}
