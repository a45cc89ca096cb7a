// Package checkpoint records incremental checkpoints of an overlay upper
// directory (a session's workspace layer; also its container layer and
// home) on disk, and restores them.
//
// A Store holds the checkpoints of one directory. Record reads only what
// changed since the newest checkpoint: it walks the directory (through
// package confined: nothing beneath it is reached through a symlink,
// FIFOs are never opened), compares each file's stat data (device, inode,
// size, mode, owner, mtime, ctime) with the newest checkpoint's, and reads
// only the files that differ. Content is kept in a content-addressed
// object store (objects/sha256/..., each object written to a temporary
// file, synced and renamed), so a file is stored once however many
// checkpoints hold it. Each directory is one tree object (its entries:
// names, types, modes, owners, times, sizes, content digests, symlink
// targets, hard-link groups, whiteouts, opaque marks, user.* xattrs,
// sparse regions), named by its digest like a git tree: a checkpoint
// writes the changed files, the trees of the directories on the way to
// them, and a small record (checkpoints/N.json) naming the root tree. The
// record is written last, atomically: a Record that is killed lists
// nothing, and GC removes its objects.
//
// Why not the snapshot store's layers: a layer is a tar of a whole
// directory. An incremental layer (the changes since the last one) would
// make every checkpoint depend on the chain before it: restoring turn N
// would apply N layers, pruning one would mean merging it into the next,
// and the diff of a turn would mean reading tars. Per-file objects and
// per-directory trees make every checkpoint whole by itself (restore
// reads one tree; prune deletes a record and collects unreferenced
// objects), a turn's diff a comparison of trees that skips every equal
// subtree without reading any content, and an unchanged file costs
// nothing at all.
//
// Measured (BenchmarkCheckpoint10Files: a 1 GiB workspace of 1,000 files
// of 1 MiB in 50 directories on tmpfs, the store on this VM's ext4 disk,
// 2 cores; `go test -run '^$' -bench Checkpoint10Files -benchtime 10x
// ./checkpoint/`): a checkpoint after 10 files of 100 KiB changed reads
// 1,024,000 bytes and writes 1,074,756 (the files, the three trees on
// their way and the record): bytes written ≈ the changed files. Its time
// on this shared machine (2 cores, load average 17-23 from other jobs)
// was a p50 of 37 ms (fastest 20 ms) in one run and 66-73 ms in others,
// against a target of 30 ms; most of it is syncing the 14 new objects
// (done in parallel, which halved it) and the record. A full
// snapshot layer of the same tree (snapshot.WriteLayer into the snapshot
// store) writes 956 MB to 1 GB and takes 6-7 s.
//
// Sharing: files are shared between checkpoints by digest. Where the
// store and the recorded directory are on a file system with reflinks
// (btrfs, XFS: a disk workspace), an object is a reflink of the file, its
// data never copied. Objects are never hard-linked into a workspace, nor
// a workspace's files into the store: the session's next write to the
// file would change the stored checkpoint.
//
// Sparse files stay sparse: their data regions (SEEK_DATA/SEEK_HOLE) are
// read, stored at their offsets in a sparse object and written back
// likewise; the digest of such a file covers its size, its regions and
// their data, so a 40 GB file of a few bytes is read, hashed and restored
// in microseconds.
//
// A restore makes every file anew (new inodes and ctimes), so Restore
// keeps the stat keys of the files it made, and the next Record of the
// directory restored into (a woken session's workspace, container layer
// or home) reads only what changed after it (restored.go).
//
// Pins (Pin, Unpin) keep a checkpoint a snapshot or a fork uses: Prune
// and Remove never delete a pinned checkpoint, nor the newest one (the
// base of the next Record).
package checkpoint
