package confined

import "golang.org/x/sys/unix"

// OpenWritable opens the existing regular file rel for writing (O_WRONLY)
// and returns its descriptor (the caller closes it) and stat. It never
// creates or truncates the file, and refuses a symlink anywhere on the
// path; a FIFO, socket or device is refused before any write: the open is
// non-blocking (a FIFO without a reader fails at once) and the type is
// checked on the open descriptor.
func (r *Root) OpenWritable(rel string) (int, *unix.Stat_t, error) {
	fd, st, err := r.openRegular(rel, unix.O_WRONLY)
	if err == nil {
		unix.SetNonblock(fd, false)
	}
	return fd, st, err
}
