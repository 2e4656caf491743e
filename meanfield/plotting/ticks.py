"""Readable logarithmic axes: labels at chosen values only, in plain numbers.

On a log axis spanning less than a decade or two, matplotlib labels the minor ticks
(``2×10^1 3×10^1 4×10^1``), which collide; ``log_ticks`` puts the labels at the given values
(the sizes or times that were measured) and none elsewhere."""
__all__ = ["log_ticks"]


def log_ticks(axis, values, fmt="{:g}"):
    """Label the log-scaled ``axis`` (``ax.xaxis`` or ``ax.yaxis``) at ``values`` only.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
    values : sequence of float
        Where the labels go (positive).
    fmt : str
        Format of each label.

    Returns
    -------
    matplotlib.axis.Axis

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.loglog([128, 2048], [1.0, 0.1])
    >>> _ = log_ticks(ax.xaxis, [128, 512, 2048])
    >>> [t.get_text() for t in ax.get_xticklabels()], len(ax.xaxis.get_minorticklocs())
    (['128', '512', '2048'], 0)
    >>> plt.close(fig)
    """
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator
    values = [float(v) for v in values]
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(FixedFormatter([fmt.format(v) for v in values]))
    axis.set_minor_locator(NullLocator())
    return axis
