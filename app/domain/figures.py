"""How a case's items are drawn, as a recipe's `[display]` declares it, with or without a lab: matrices drawn
together as small multiples (`groups`), vectors drawn as line charts (`curves`), matrices of two columns drawn as
points (`scatters`), matrices that picture a plane of two coordinates (`planes`) and images in grey levels, drawn as
ink on paper (`images`, and a group's `ink`)."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Display:
    """A recipe's [display]: its groups in order (each {key, title} and optionally each, over, scale, ink), its
    curves by vector key (each {x, y, log}), its scatters and its planes by matrix key (each {x, y}), its images by
    matrix key (each {ink}), and the recorded matrix a catalog card shows ({case, item}, else None)."""

    groups: tuple[dict, ...] = ()
    curves: dict[str, dict] = field(default_factory=dict)
    scatters: dict[str, dict] = field(default_factory=dict)
    planes: dict[str, dict] = field(default_factory=dict)
    images: dict[str, dict] = field(default_factory=dict)
    picture: dict | None = None  # the catalog card's: {case, item}

    def sections(self, matrices: list[dict]) -> list[dict]:
        """A case's matrices as a page draws them, in order: the maps of each declared group (keyed `<key>_c<n>`)
        together where the first of them stands, with the group and the matrix its `over` names (else None), each
        map with its `index` n; every other matrix alone, as `{"matrix": ...}`."""
        groups = {group["key"]: group for group in self.groups}
        found: dict[str, dict] = {}
        sections = []
        for matrix in matrices:
            key, marked, index = matrix["key"].rpartition("_c")
            group = groups.get(key) if marked and index.isdigit() else None
            if group is None:
                sections.append({"matrix": matrix})
                continue
            if key not in found:
                over = next((m for m in matrices if m["key"] == group.get("over")), None)
                found[key] = {"group": group, "over": over, "maps": []}
                sections.append(found[key])
            found[key]["maps"].append(matrix | {"index": int(index)})
        return sections

    def curve(self, vector: dict) -> dict | None:
        """The line chart a vector is drawn as, where it is declared one: {x, y, log}."""
        return self.curves.get(vector["key"])

    def scatter(self, matrix: dict) -> dict | None:
        """The scatter a matrix of two columns is drawn as, where it is declared one: {x, y}."""
        found = self.scatters.get(matrix["key"])
        return found if found and all(len(row) == 2 for row in matrix["values"]) else None

    def image(self, matrix: dict) -> dict | None:
        """How a matrix declared an image is drawn: {ink}, the value of full ink."""
        return self.images.get(matrix["key"])

    def ink(self, matrix: dict) -> float | None:
        """The value of full ink where the matrix is drawn as ink on paper (an image, or a map of a group with ink)."""
        if (image := self.image(matrix)) is not None:
            return image["ink"]
        key, marked, index = matrix["key"].rpartition("_c")
        group = next((g for g in self.groups if g["key"] == key), None) if marked and index.isdigit() else None
        return group.get("ink") if group else None

    def plane_axes(self, matrix: dict) -> dict | None:
        """A declared plane's axes as a heatmap draws them: titled, without row and column numbers."""
        found = self.planes.get(matrix["key"])
        return {"titles": {"rows": found["y"], "columns": found["x"]}, "numbered": False} if found else None
