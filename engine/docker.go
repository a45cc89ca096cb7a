package engine

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/airlock/airlock/errdefs"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/checkpoint"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Docker is the part of the Docker Engine API the engine uses. The real
// implementation is *client.Client; unit tests embed this interface in a
// fake and override the calls they need.
type Docker interface {
	Ping(ctx context.Context) (types.Ping, error)
	ServerVersion(ctx context.Context) (types.Version, error)
	Info(ctx context.Context) (system.Info, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	CheckpointCreate(ctx context.Context, containerID string, options checkpoint.CreateOptions) error
	ContainerPause(ctx context.Context, containerID string) error
	ContainerUpdate(ctx context.Context, containerID string, updateConfig container.UpdateConfig) (container.UpdateResponse, error)
	ContainerUnpause(ctx context.Context, containerID string) error
	ContainerAttach(ctx context.Context, containerID string, options container.AttachOptions) (types.HijackedResponse, error)
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	ContainerExecResize(ctx context.Context, execID string, options container.ResizeOptions) error
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageSave(ctx context.Context, imageIDs []string, saveOpts ...client.ImageSaveOption) (io.ReadCloser, error)
	ImageLoad(ctx context.Context, input io.Reader, loadOpts ...client.ImageLoadOption) (image.LoadResponse, error)
}

var _ Docker = (*client.Client)(nil)

// NewDocker connects to the Docker Engine named by the environment
// (DOCKER_HOST, default the local socket), negotiating the API version so
// that Engine 20.10 (API 1.41) and newer work.
func NewDocker() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// dockerError classes a Docker error and says what to do about it.
func dockerError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return errdefs.Unavailablef("Docker is not running (%s): start it with `sudo systemctl start docker` (or `sudo dockerd &`), then try again", what)
	case cerrdefs.IsNotFound(err):
		return errdefs.Wrap(errdefs.NotFound, fmt.Errorf("%s: %w", what, err))
	case cerrdefs.IsConflict(err):
		return errdefs.Wrap(errdefs.Conflict, fmt.Errorf("%s: %w", what, err))
	case cerrdefs.IsInvalidArgument(err):
		return errdefs.Wrap(errdefs.Invalid, fmt.Errorf("%s: %w", what, err))
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
