package confined

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// OpenWritable opens the existing regular file rel for writing (O_WRONLY)
// and returns its descriptor (the caller closes it) and stat. It never
// creates or truncates the file, and refuses a symlink anywhere on the
// path; a FIFO, socket or device is refused before any write: the open is
// non-blocking (a FIFO without a reader fails at once) and the type is
// checked on the open descriptor.
func (r *Root) OpenWritable(rel string) (int, *unix.Stat_t, error) {
	c, err := Clean(rel)
	if err != nil {
		return -1, nil, &Error{"open", rel, err}
	}
	fd, err := r.openat(c, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		if err == unix.ENXIO || err == unix.ENODEV || err == unix.EISDIR {
			err = fmt.Errorf("%w (%v)", ErrNotRegular, err)
		}
		return -1, nil, &Error{"open", rel, err}
	}
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, nil, &Error{"open", rel, err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, &Error{"open", rel, fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode))}
	}
	unix.SetNonblock(fd, false)
	return fd, st, nil
}
