package api

import (
	"time"
)

// Snapshot is a session's state captured as an OCI image in the engine's
// snapshot store: the container's own changes (installed packages, the
// agent's home) and the workspace's changes, each a layer.
type Snapshot struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Session string    `json:"session"` // the session it was taken of
	Project string    `json:"project"`
	Image   string    `json:"image"`    // the session's image, by name
	ImageID string    `json:"image_id"` // and by id
	Created time.Time `json:"created"`
	// Digest is the image manifest's digest in the store.
	Digest string          `json:"digest"`
	Layers []SnapshotLayer `json:"layers"`
	// Frozen is how long the session was frozen to capture it; Took the
	// whole snapshot.
	Frozen time.Duration `json:"frozen"`
	Took   time.Duration `json:"took"`
	// Spec is what a restore creates the new session with. It is empty for
	// a snapshot imported from an archive: an archive's settings are never
	// used, a restore takes them from its request.
	Spec CreateRequest `json:"spec"`
}

// SnapshotLayer is one layer of a snapshot.
type SnapshotLayer struct {
	What   string `json:"what"` // "container" or "workspace"
	Digest string `json:"digest"`
	Size   int64  `json:"size"`   // bytes of the layer tar
	Files  int    `json:"files"`  // files, links and devices in it
	Bytes  int64  `json:"bytes"`  // file content
	Delete int    `json:"delete"` // deletions and opaque directories
}

// SnapshotRequest takes a snapshot of a session.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// RestoreRequest makes sessions from a snapshot.
type RestoreRequest struct {
	// N sessions (1 when 0), made in parallel.
	N int `json:"n,omitempty"`
	// Project replaces the snapshot's project. An imported snapshot needs
	// it: it has no settings of its own.
	Project string `json:"project,omitempty"`
	// Image and User replace the snapshot's; for an imported snapshot the
	// image defaults to the one its archive carried, the user to the
	// project's owner.
	Image string `json:"image,omitempty"`
	User  string `json:"user,omitempty"`
}

// Restored is what a restore made.
type Restored struct {
	Sessions []Session `json:"sessions"`
	// Warnings are things the user should know, e.g. the image was
	// rebuilt since the snapshot.
	Warnings []string `json:"warnings,omitempty"`
}

// Imported is what an import made.
type Imported struct {
	Snapshot Snapshot `json:"snapshot"`
	Warnings []string `json:"warnings,omitempty"`
}
