package engine

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/airlock/airlock/engine/api"
	"github.com/airlock/airlock/errdefs"
	"github.com/airlock/airlock/gitrules"
	"github.com/airlock/airlock/review"
)

// ignoringFor is the ignore rules a review of the session whose upper
// layer is upper applies: the project's own (its .gitignore files,
// .git/info/exclude, its owner's core.excludesFile and attributes file,
// read as data) and the session's over them.
func ignoringFor(project, upper string) *review.Ignoring {
	return review.LoadIgnoring(upper, project, ownerGlobals(project))
}

func ownerGlobals(project string) review.Globals {
	ign, attrs, err := gitrules.OwnerGlobals(project)
	if err != nil {
		return review.Globals{} // unreadable: the project's own rules still apply
	}
	return review.Globals{Ignore: ign, Attributes: attrs}
}

// globalsStamp is what of the rules a kept summary's stamp must hold: the
// owner's files, which no project path's stat covers.
func globalsStamp(project string) string {
	g := ownerGlobals(project)
	h := sha256.New()
	h.Write(g.Ignore)
	h.Write([]byte{0})
	h.Write(g.Attributes)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// ignoredMode is a diff query's choice in the review's terms.
func ignoredMode(q string) (review.IgnoredMode, error) {
	switch q {
	case api.IgnoredModeSummarise:
		return review.IgnoredSummarise, nil
	case api.IgnoredModeOnly:
		return review.IgnoredOnly, nil
	case api.IgnoredModeAll:
		return review.IgnoredAll, nil
	}
	return 0, errdefs.Invalidf("ignored=%q is not a choice: only, all, or none to summarise ignored changes", q)
}

// ignoredOptions are a selection's review options for ignored changes:
// all of them listed when it includes them, else those it names.
func ignoredOptions(sel review.Selection, opts review.Options) review.Options {
	if sel.IncludeIgnored {
		opts.Ignored = review.IgnoredAll
	} else {
		opts.Named = append(opts.Named, sel.Paths...)
		for _, p := range sel.RawPaths {
			opts.Named = append(opts.Named, string(p))
		}
	}
	return opts
}
