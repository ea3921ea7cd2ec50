"""Hints on stderr where the inputs suggest a likely mistake (the wrong favourable class, a threshold
nothing reaches, an identifier used as a feature). Each function returns the message, or None."""

from __future__ import annotations

__all__ = ["model_classes", "already_favorable_hint", "no_favorable_hint", "robust_infeasible_hint", "id_like_warning",
           "ignored_columns_warning", "sensitive_warning", "age_horizon_hint", "many_levels_warning",
           "location_warning", "schema_shape_warnings", "margin_hint", "infeasible_hints",
           "range_outside_warning", "outlier_bound_note",
           "withheld_levels_note", "flag_note", "unordered_scale_warning", "past_record_warning",
           "label_leak_warning"]


def _plain(value):
    item = getattr(value, "item", None)
    value = item() if callable(item) and type(value).__module__ == "numpy" else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def model_classes(model) -> list:
    """The model's classes as plain values (empty when it does not say)."""
    classes = getattr(getattr(model, "estimator", None), "classes_", None)
    if classes is None:
        return []
    try:
        return [_plain(c) for c in list(classes)]
    except TypeError:
        return []


def _others(model) -> list:
    favorable = _plain(model.favorable)
    return [c for c in model_classes(model) if str(c) != str(favorable)]


def already_favorable_hint(n_already: int, n: int, model) -> str | None:
    """Most applicants are already favourable: the favourable class may be the other one."""
    if n_already < 2 or 2 * n_already <= n:
        return None
    others = _others(model)
    favorable = _plain(model.favorable)
    if len(others) == 1:
        what = f"pass --favorable {others[0]}"
    elif others:
        what = f"pass --favorable with the class you mean (the model's classes: {', '.join(map(str, others))})"
    else:
        what = "pass --favorable with the class you mean"
    return (f"Hint: {n_already} of {n} applicants are already favourable: the model predicts class {favorable} for "
            f"them. If {favorable} is not the class applicants want, {what}.")


def robust_infeasible_hint(model, margin: float) -> str | None:
    """Many applicants are infeasible and the rule is more than the model (``--also-valid-for``, ``--robust``,
    ``--robust-support``): say what to relax, and when the labels' share asked is one no training row has."""
    from ..judge import Judge

    if not isinstance(model, Judge):
        return None
    near = any(m.radius_asked is not None for m in model.support)
    relax = [o for o, on in (("--robust-level", bool(model.refits)),
                             ("--robust-support-radius none", near),
                             ("--robust-support-level or --robust-support none", bool(model.support))) if on]
    relax = f"; {' or '.join(relax)} would plan for more of them, with plans less likely to survive a model " \
        "update (docs/robust.md)" if relax else ""
    message = (f"Hint: many applicants have no candidate that every model accepts (see each plan's reason){relax}.")
    for support in model.support:
        if float(support.threshold) <= float(model.model.threshold):
            continue                     # the share asked is the threshold's: not what --robust-support-level set
        asked, highest = float(support.threshold) + float(margin), support.highest_share()
        if asked > highest:
            message += (f" No training row has a share of favourable labels of {asked:g} among its {support.k} "
                        f"nearest (the highest is {highest:.4g}): --robust-support-level {support.threshold:g} "
                        f"plus --margin {margin:g} leaves every applicant without a plan.")
    return message


def margin_hint(highest: float, threshold: float, margin: float) -> str:
    """``--margin`` above the highest probability of the candidate training rows: no applicant has a candidate,
    whatever its constraints."""
    import math

    room = math.floor((highest - threshold) * 1e4) / 1e4      # rounded down: a margin this small keeps a row
    lower = (f"a --margin of at most {room:g} keeps some" if room > 0 else
             "no --margin keeps any (--margin 0 plans at the model's threshold)")
    return (f"Hint: lower --margin: the highest probability reachable is {highest:.4g} (the most the model gives any "
            f"favourable training row), below the {threshold + margin:g} that --threshold {threshold:g} plus "
            f"--margin {margin:g} asks for, so no applicant has a candidate, whatever its constraints; {lower} of "
            "them favourable.")


#: How many causes of infeasible plans :func:`infeasible_hints` names (the others are counted).
_CAUSES_SHOWN = 3


def infeasible_hints(causes, schema, *, policy: str) -> list[str]:
    """What to relax for the applicants left without enough candidates, one line per cause (the rule that removed
    the most candidates of each applicant: a move bound, a range, an immutable or monotone feature).

    ``causes``: dicts with ``rule`` (``max-move``, ``range``, ``immutable``, ``increasing``, ``decreasing`` or
    ``other``), ``n`` (applicants) and, but for ``other``, ``feature``, ``applicant``, ``removed``, ``n_pool``,
    ``detail`` (a range's text), most applicants first. ``policy``: the immutable policy in effect.
    """
    lines = []
    for cause in causes[:_CAUSES_SHOWN]:
        lines.append(_cause_hint(cause, schema, policy))
    rest = causes[_CAUSES_SHOWN:]
    ruled = [c for c in rest if c["rule"] != "other"]
    n_other = sum(c["n"] for c in rest if c["rule"] == "other")
    if ruled:
        # causes beyond the ones shown are rules too, not "other reasons"
        named = ", ".join(f"{c['feature']} ({c['n']})" for c in ruled)
        more = f", and {n_other} for other reasons" if n_other else ""
        lines.append(f"Hint: {sum(c['n'] for c in ruled)} more applicant(s) have too few candidates, most limited by "
                     f"{named}{more} (see each plan's reason).")
    elif n_other:
        lines.append(f"Hint: {n_other} other applicant(s) have no recourse for other reasons (see each plan's "
                     "reason).")
    return [line for line in lines if line]


def _cause_hint(cause: dict, schema, policy: str) -> str:
    n, rule = cause["n"], cause["rule"]
    who = f"{n} applicant(s) have too few candidates"
    if rule == "other":
        return f"Hint: {n} applicant(s) have no recourse (see each plan's reason)."
    name = cause["feature"]
    quoted = _quoted(name)
    removed = (f"it removed {cause['removed']} of the {cause['n_pool']} favourable training rows (candidates) of "
               f"applicant {cause['applicant']}")
    if rule == "max-move":
        feature = schema.feature(name) if name in schema.feature_names else None
        share = getattr(feature, "max_move_share", None)
        of = "levels" if getattr(feature, "kind", "") == "ordinal" else "training range"
        now = f" (now {share:g} of its {of})" if share is not None else ""
        return (f"Hint: {who}, most limited by how far {name} may move: raise --max-move {quoted}=SHARE{now}, or "
                f"[max_move] in the schema file; --max-move {quoted}=none lifts the bound: {removed}.")
    if rule == "range":
        detail = f" ({cause['detail']})" if cause.get("detail") else ""
        return (f"Hint: {who}, most limited by the range of {name}{detail}: widen --range {quoted}=... or [range] "
                f"in the schema file: {removed}.")
    what = {"immutable": "which may not change", "increasing": "which may only increase",
            "decreasing": "which may only decrease"}[rule]
    from ..schema import named_fact

    fact = named_fact(name)
    if fact == "a protected characteristic":
        # not a setting to relax: what the counts show is how few favourable rows the model grants the group
        return (f"Hint: {who}, most limited by {name}, {what} ({removed}): {name} is named like {fact}, so the rule "
                f"stays; few of the rows the model favours share these applicants' {name}, a disparity of the "
                f"model and its data for review (frpd audit --by {_quoted(name)} measures it), not a rule to relax.")
    if fact is not None:
        # a fact of the applicant: relaxing it is no advice; what is left is a finding about these applicants
        project = "; --immutable-policy project may find more" if policy == "filter" and rule == "immutable" else ""
        return (f"Hint: {who}, most limited by {name}, {what} ({removed}): {name} is named like {fact}, so the rule "
                f"stays: few favourable training rows keep to it for these applicants{project} (see each plan's "
                f"reason).")
    if policy == "filter":
        return (f"Hint: {who}, most limited by {name}, {what} ({removed}); try --immutable-policy project, or "
                "declare fewer immutable or monotone features (see each plan's reason).")
    return (f"Hint: {who} even with projection, most limited by {name}, {what} ({removed}); declare fewer "
            "immutable or monotone features (see each plan's reason).")


def no_favorable_hint(n_favorable: int, n_rows: int, model, highest: float) -> str | None:
    """No training row reaches the threshold: every applicant will be infeasible."""
    if n_favorable or not n_rows:
        return None
    favorable = _plain(model.favorable)
    classes = model_classes(model)
    classes = f" (the model's classes: {', '.join(map(str, classes))})" if classes else ""
    return (f"Hint: the model accepts none of the {n_rows} training rows as class {favorable} at --threshold "
            f"{model.threshold:g} (highest probability {highest:.4g}), so no applicant can get a recourse. Check "
            f"--favorable{classes}, or lower --threshold below {highest:.4g}.")


def no_labels_warning(target: str, values, favorable, source: str) -> str:
    """No training row is labelled favourable: the target column does not write the favourable class as the
    model does (``approved`` against the model's 1), so whatever learns from the labels learns nothing."""
    shown = ", ".join(str(v) for v in values[:10]) + (", ..." if len(values) > 10 else "")
    return (f"Warning: no row of {source} has the favourable class {_plain(favorable)} in its target column "
            f"'{target}' (its values: {shown}). What learns from the labels finds no favourable example: "
            f"--candidates labeled leaves every applicant without candidates, --robust cannot refit and label "
            f"support accepts nothing. Pass as --target a column coded as the model's classes.")


def _listed(names) -> str:
    return ", ".join(f"'{n}'" for n in names)


def id_like_warning(names, source: str) -> str | None:
    """Features that hold a different value in every training row."""
    if not names:
        return None
    listed = _listed(names)
    one = len(names) == 1
    return (f"Warning: {'column' if one else 'columns'} {listed} of {source} {'holds' if one else 'hold'} a "
            f"different value in every row, like an identifier, and {'is' if one else 'are'} used as "
            f"{'a feature' if one else 'features'}: recourses that change an identifier mean nothing. Pass "
            f"--id-column for an applicant id, or list {'it' if one else 'them'} under exclude in the schema file.")


def sensitive_warning(sensitive, ages, source: str) -> str | None:
    """Features free to change whose names say a person cannot change them
    (:func:`frpd_cli.schema.sensitive_like_features`): one warning for both kinds, or None."""
    parts = []
    if sensitive:
        one = len(sensitive) == 1
        parts.append(
            f"Warning: {'feature' if one else 'features'} {_listed(sensitive)} of {source} "
            f"{'is' if one else 'are'} named like a protected characteristic (race, sex, religion, national "
            f"origin, marital status, disability) and may change: a recourse may tell an applicant to change "
            f"{'it' if one else 'them'}: advice no one should be given, which a fair-lending review would reject. Declare "
            f"{_declare_immutable(sensitive)}; to let "
            f"{'it' if one else 'them'} change on purpose, list {'it' if one else 'them'} with the other features "
            "that may change in --vary (vary = [...]).")
    if ages:
        one = len(ages) == 1
        name = _quoted(ages[0])
        parts.append(
            f"Warning: {'feature' if one else 'features'} {_listed(ages)} of {source} {'is' if one else 'are'} "
            f"named like an age and may move both ways: a recourse may tell an applicant to be younger. Declare "
            f"--increasing {name} (with a horizon: --range {name}=+0:+5) or --immutable {name}, or increasing = "
            "[...] in the schema file.")
    return "\n".join(parts) or None


def many_levels_warning(many, source: str) -> str | None:
    """Unordered categorical features a recourse may move to many levels
    (:func:`frpd_cli.schema.many_level_features`): one line per feature, or None."""
    from ..schema import MANY_LEVELS

    lines = []
    for name, n_levels in many:
        quoted = _quoted(name)
        lines.append(
            f"Warning: feature '{name}' of {source} is a categorical feature without an order with {n_levels} levels "
            f"(more than {MANY_LEVELS}) and may change: a recourse may move it to any of them, and the move to one "
            f"level ('change {name} to ...') can become the main advice. Declare it immutable (--immutable {quoted}, "
            f"or immutable = [...] in the schema file), or limit the levels a recourse may choose (--range "
            f"{quoted}=LEVEL,LEVEL, or [range] in the schema file).")
    return "\n".join(lines) or None


def _declare_immutable(names) -> str:
    """``it immutable (--immutable a, or immutable = [...] in the schema file)`` (``them`` for several)."""
    flags = " ".join(f"--immutable {_quoted(n)}" for n in names)
    return f"{'it' if len(names) == 1 else 'them'} immutable ({flags}, or immutable = [...] in the schema file)"


def _named_features(names, source: str, verb: str = "is") -> str:
    """``Warning: feature 'a' of SOURCE is`` / ``Warning: features 'a', 'b' of SOURCE are`` (``verb`` singular:
    ``is`` or a verb taking an ``s``)."""
    one = len(names) == 1
    plural = "are" if verb == "is" else verb.removesuffix("s")
    return f"Warning: {'feature' if one else 'features'} {_listed(names)} of {source} {verb if one else plural}"


def location_warning(names, source: str) -> str | None:
    """Free features named like a place of residence (:func:`frpd_cli.schema.location_like_features`)."""
    if not names:
        return None
    one = len(names) == 1
    return (f"{_named_features(names, source, 'reads')} like a location (zip, postcode, postal, city, county, "
            f"state, region, address) and may change: recourse would ask the applicant to move. Declare "
            f"{_declare_immutable(names)}; to let "
            f"{'it' if one else 'them'} change on purpose, list {'it' if one else 'them'} in --vary (vary = [...]) "
            f"or limit {'its' if one else 'their'} values with --range.")


def past_record_warning(names, source: str) -> str | None:
    """Free features named like a record of the past (:func:`frpd_cli.schema.past_record_features`)."""
    if not names:
        return None
    return (f"{_named_features(names, source)} named like a record of the past (prior, previous, history, "
            f"delinquencies, arrests, convictions, charge-offs) and may change: a recourse may ask an applicant to "
            f"have fewer prior convictions, another credit history or a smaller charge-off, which no one can undo "
            f"(or, declared --increasing, more of them, which is no advice either). Declare "
            f"{_declare_immutable(names)}.")


def label_leak_warning(leaks, source: str) -> str | None:
    """Mutable features that alone tell the training labels apart (:func:`frpd_cli.leaks.find_label_leaks`)."""
    if not leaks:
        return None
    one = len(leaks) == 1
    names = [leak.feature for leak in leaks]
    scores = ", ".join(f"{leak.balanced_accuracy:.3f}" for leak in leaks)
    return (f"{_named_features(names, source, verb='separates')} the training labels on "
            f"{'its' if one else 'their'} own (balanced accuracy {scores} for one threshold or one class per level; "
            f"1 is perfect): a feature that predicts the outcome this well is often recorded after it (a charge-off "
            f"after a default), and a recourse that moves it is no advice. If {'it is' if one else 'they are'}, "
            f"train the model without {'it' if one else 'them'}; else declare {_declare_immutable(names)}.")


def unordered_scale_warning(names, source: str) -> str | None:
    """Free unordered categorical features named like a scale of attainment
    (:func:`frpd_cli.schema.unordered_scale_features`)."""
    if not names:
        return None
    one, name = len(names) == 1, names[0]
    return (f"{_named_features(names, source)} named like a scale of attainment (education, qualification, "
            f"schooling) but categorical without an order: a recourse may move {'it' if one else 'them'} down a "
            f"level, and every move costs the same (the highest level as much as the next). Declare the order under "
            f"[ordinal] in the schema file ({name} = [lowest, ..., highest]) and --increasing {_quoted(name)}; or "
            f"--immutable {_quoted(name)}.")


def range_outside_warning(outside, source: str) -> str | None:
    """Absolute ranges that hold no training value (:func:`frpd_cli.schema.ranges_outside_training`): one line
    per feature, or None."""
    lines = []
    for name, low, high, minimum, maximum in outside:
        declared = f"{'' if low is None else f'{low:g}'}:{'' if high is None else f'{high:g}'}"
        side = "above" if low is not None and low > maximum else "below"
        lines.append(
            f"Warning: the range of '{name}' ({declared}, from --range or [range] in the schema file) lies wholly "
            f"{side} its values in {source} (min {minimum:g}, max {maximum:g}): no training row is inside it, so no "
            f"prototype can change '{name}' and applicants outside it are likely left without a plan. Check the "
            "range's units (a typing error?) or widen it.")
    return "\n".join(lines) or None


def schema_shape_warnings(schema, source: str, *, vary=(), id_like=(), leaks=()) -> list[str]:
    """The warnings on the features themselves that every command reading a schema prints: many levels (but for
    the ``id_like`` features, which :func:`id_like_warning` reports), and names of a place of residence;
    features of ``leaks`` (names), reported as separating the labels, are not reported again as records of the
    past."""
    from ..schema import location_like_features, many_level_features, past_record_features, unordered_scale_features

    many = [(name, n) for name, n in many_level_features(schema) if name not in set(id_like)]
    messages = (many_levels_warning(many, source),
                location_warning(location_like_features(schema, vary=vary), source),
                unordered_scale_warning(unordered_scale_features(schema, vary=vary), source),
                past_record_warning([n for n in past_record_features(schema, vary=vary) if n not in set(leaks)],
                                    source))
    return [m for m in messages if m]


def age_horizon_hint(ages, source: str) -> str | None:
    """Ages that only increase, with no horizon but the built-in move bound
    (:func:`frpd_cli.schema.ages_without_horizon`): a recourse may ask someone to wait that long."""
    if not ages:
        return None
    name, bound = ages[0]
    from ..schema import DEFAULT_MAX_MOVE

    if bound is None:
        how_far = "by any number of levels (the move bound reaches every level of this ordinal)"
    elif isinstance(bound, int):          # an ordinal's bound, in levels
        how_far = (f"by up to {bound} level{'' if bound == 1 else 's'} (--max-move {DEFAULT_MAX_MOVE:g} of its "
                   "levels, the built-in bound)")
    else:
        how_far = f"by up to {bound:g} (--max-move {DEFAULT_MAX_MOVE:g} of its training range, the built-in bound)"
    more = f" ({', '.join(repr(n) for n, _ in ages[1:])} too)" if len(ages) > 1 else ""
    return (f"Hint: '{name}' of {source}{more} may only increase and has no horizon: a recourse may raise it "
            f"{how_far}, that is, ask the applicant to wait that long. A horizon the applicant can wait for, such as "
            f"--range {_quoted(name)}=+0:+5 (or [range] in the schema file), keeps the advice to it.")


def outlier_bound_note(schema, encoder, source: str) -> str | None:
    """Numeric features whose move bound is a share of less than their training range: a few outlying values
    stretch the range (:func:`frpd_cli.schema.move_span`), and the bound says how far it lets the feature move."""
    capped = []
    for j, f in enumerate(schema.features):
        if f.max_move is None or not f.max_move_share or not f.is_numeric:
            continue
        whole = float(encoder.maximum[j] - encoder.minimum[j])
        if f.max_move < f.max_move_share * whole * (1 - 1e-9):
            capped.append((f, encoder.minimum[j], encoder.maximum[j]))
    if not capped:
        return None
    parts = [f"'{f.name}' (training values {low:.10g} to {high:.10g}: at most {f.move_limit:.6g} either way)"
             for f, low, high in capped[:5]]
    more = f" and {len(capped) - 5} more" if len(capped) > 5 else ""
    return (f"Note: a few outlying values of {source} stretch the training range of {', '.join(parts)}{more}; "
            "--max-move takes its share of twice the range of the central 99% of the values instead, so that the "
            "outliers do not widen the moves (docs/move-bound.md). --max-move COL=SHARE or COL=none sets it.")


def withheld_levels_note(schema) -> str | None:
    """Unordered categorical features whose levels of missing information a recourse does not move to
    (``Feature.withheld``: ``Other/Unknown``): what was left out and how to allow it."""
    withheld = [f for f in schema.features if f.withheld]
    if not withheld:
        return None
    parts = [f"'{f.name}' ({', '.join(map(str, f.withheld))})" for f in withheld[:5]]
    more = f" and {len(withheld) - 5} more" if len(withheld) > 5 else ""
    first = withheld[0]
    example = ",".join(str(v) for v in first.levels[:8]) + (",..." if len(first.levels) > 8 else "")
    example = _quoted(f"{first.name}={example}")
    return (f"Note: no recourse moves {', '.join(parts)}{more} to a level that records missing information: advice "
            "to withhold information is no recourse (an applicant already there may stay). To allow such a level, "
            f"list the levels a recourse may choose: --range {example} (or [range] in the "
            "schema file).")


def flag_note(schema, flags, source: str) -> str | None:
    """Flags free to change (:func:`frpd_cli.schema.flag_features`, ``(name, low, high)``) that a move bound in
    effect would hold were they scales: a recourse may flip them, and one that records a fact needs declaring."""
    held = []
    for name, low, high in flags:
        share = schema.feature(name).max_move_share if name in schema.feature_names else None
        if share is not None and share != float("inf"):
            held.append((name, low, high))
    if not held:
        return None
    one = len(held) == 1
    parts = [f"'{name}' ({low}/{high})" for name, low, high in held]
    name = _quoted(held[0][0])
    return (f"Note: {'feature' if one else 'features'} {', '.join(parts)} of {source} {'is a flag' if one else 'are flags'}"
            f": a flip is a change of state, not a move along a scale, so the move bound (--max-move) does not hold "
            f"{'it' if one else 'them'} and a recourse may flip {'it' if one else 'them'}. If one records a fact the "
            f"applicant cannot change, declare it immutable (--immutable {name}, or immutable = [...] in the schema "
            f"file); to allow one direction only, --increasing {name} or --decreasing {name} (docs/move-bound.md).")


def _quoted(name: str) -> str:
    """A column name as typed in a shell: quoted when it holds anything but letters, digits, ``_`` and ``-``."""
    import shlex

    return shlex.quote(str(name))


def ignored_columns_warning(columns, source: str, id_column: str | None) -> str | None:
    """The columns of an applicants file that are neither features nor the id column; with a hint when one of
    them is named like an identifier and no --id-column was given (without it, applicants are row numbers)."""
    if not columns:
        return None
    from ..schema import looks_like_id_name

    message = f"Warning: ignoring column(s) {', '.join(columns)} of {source} (not features)."
    named = [c for c in columns if looks_like_id_name(c)]
    if id_column is None and named:
        message += (f"\nHint: '{named[0]}' looks like the applicants' identifier: pass --id-column {named[0]} (or "
                    f"id_column = \"{named[0]}\" in the schema file) to name each plan by it; without it, "
                    "applicants are numbered by row from 0.")
    return message
