// Package confined opens files beneath a directory whose contents an
// adversary controls: a session's upper layer, its merged workspace, its
// `.git`, a container's root. Every lookup stays beneath the root, never
// passes through a symlink (in any component, not only the last) or a
// procfs magic link, and a file is only opened for reading once it is known
// to be a regular file, so a FIFO cannot block the engine and a device is
// never opened.
//
// On kernels with openat2(2) (Linux 5.6 and newer) the kernel does the
// confinement (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS);
// elsewhere, or where a seccomp profile refuses openat2, the same rules
// are kept by walking one component at a time with O_NOFOLLOW.
package confined
