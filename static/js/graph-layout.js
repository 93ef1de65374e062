// A layered drawing of one level of the graph (a module's direct contents), top to bottom: ranks by the
// longest path, dummy points for edges that span ranks, orders by barycentre sweeps, and x positions that
// pull each node under what feeds it without overlaps. Linear in the nodes, edges and spans, so a module's
// contents are laid out as it opens, whatever the size of the whole model.

const SWEEPS = 4;
const LONG = 6; // an edge across more ranks than this runs down a lane at the side, shared by its source

/**
 * @param {{id: string, w: number, h: number, rank?: "min" | "max"}[]} nodes  "min" keeps a node on the
 *   top rank and "max" on the bottom one (the points where edges enter and leave a module).
 * @param {[string, string][]} edges
 * @returns {{width: number, height: number, boxes: Map<string, {x: number, y: number, w: number, h: number}>,
 *   routes: Map<string, number[][]>}} top-left boxes, and each edge's points keyed by edgeKey().
 */
export function layered(nodes, edges, { rankSep = 26, nodeSep = 18 } = {}) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const unique = new Map();
  for (const [s, t] of edges) {
    if (s !== t && index.has(s) && index.has(t)) unique.set(edgeKey(s, t), [index.get(s), index.get(t)]);
  }
  const keys = [...unique.keys()];
  // A recorded graph has no cycle; a hand-made one may: its back edges are ranked turned round.
  const forward = acyclic(n, [...unique.values()]);
  const rank = ranks(nodes, forward);

  // Every edge becomes a chain through one point per rank it crosses.
  const kind = nodes.map(() => "node");
  const width = nodes.map((node) => node.w);
  const height = nodes.map((node) => node.h);
  const up = nodes.map(() => []);
  const down = nodes.map(() => []);
  const chains = forward.map(([a, b]) => {
    if (rank[b] - rank[a] > LONG) return null; // drawn on a lane beside the rows, not through them
    const chain = [a];
    for (let r = rank[a] + 1; r < rank[b]; r++) {
      chain.push(kind.push("dummy") - 1);
      width.push(0);
      height.push(0);
      up.push([]);
      down.push([]);
      rank.push(r);
    }
    chain.push(b);
    for (let i = 1; i < chain.length; i++) {
      down[chain[i - 1]].push(chain[i]);
      up[chain[i]].push(chain[i - 1]);
    }
    return chain;
  });

  const rows = orderRows(rank, up, down, kind.length);
  const x = placeX(rows, width, kind, up, down, nodeSep);
  const rowTop = [];
  let y = 0;
  for (const row of rows) {
    let tallest = 0;
    for (const v of row) tallest = Math.max(tallest, height[v]);
    rowTop.push([y, tallest]);
    y += tallest + rankSep;
  }
  let left = 0;
  x.forEach((v, i) => { left = Math.min(left, v - width[i] / 2); });
  const boxes = new Map();
  let right = 0;
  nodes.forEach((node, i) => {
    const [top, tallest] = rowTop[rank[i]];
    const box = { x: x[i] - node.w / 2 - left, y: top + (tallest - node.h) / 2, w: node.w, h: node.h };
    boxes.set(node.id, box);
    right = Math.max(right, box.x + box.w);
  });
  const routes = new Map();
  const lanes = new Map();
  const inner = right;
  forward.forEach((pair, i) => {
    if (!chains[i]) {
      const [from, to] = (pair.reversed ? [pair[1], pair[0]] : pair).map((v) => boxes.get(nodes[v].id));
      if (!lanes.has(pair[0])) lanes.set(pair[0], inner + nodeSep * (lanes.size + 1));
      const lane = lanes.get(pair[0]);
      routes.set(keys[i], [[from.x + from.w / 2, from.y + from.h], [lane, from.y + from.h + rankSep / 2],
        [lane, to.y - rankSep / 2], [to.x + to.w / 2, to.y]]);
      right = Math.max(right, lane);
      return;
    }
    const chain = pair.reversed ? [...chains[i]].reverse() : chains[i];
    const points = chain.slice(1, -1).map((v) => [x[v] - left, rowTop[rank[v]][0] + rowTop[rank[v]][1] / 2]);
    const from = boxes.get(nodes[chain[0]].id);
    const to = boxes.get(nodes[chain[chain.length - 1]].id);
    routes.set(keys[i], [[from.x + from.w / 2, from.y + from.h], ...points, [to.x + to.w / 2, to.y]]);
    for (const p of points) right = Math.max(right, p[0]);
  });
  return { width: right, height: Math.max(0, y - rankSep), boxes, routes };
}

export function edgeKey(source, target) {
  return `${source}\u0001${target}`;
}

/** The edges as [from, to] pairs, each back edge of a depth-first walk turned round (marked `reversed`). */
function acyclic(n, pairs) {
  const out = Array.from({ length: n }, () => []);
  pairs.forEach(([a, b], i) => out[a].push([b, i]));
  const state = new Uint8Array(n); // 0 unseen, 1 on the stack, 2 done
  const back = new Set();
  for (let start = 0; start < n; start++) {
    if (state[start]) continue;
    const stack = [[start, 0]];
    state[start] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [v, next] = top;
      if (next < out[v].length) {
        top[1]++;
        const [w, edge] = out[v][next];
        if (state[w] === 1) back.add(edge);
        else if (!state[w]) {
          state[w] = 1;
          stack.push([w, 0]);
        }
      } else {
        state[v] = 2;
        stack.pop();
      }
    }
  }
  return pairs.map(([a, b], i) => (back.has(i) ? Object.assign([b, a], { reversed: true }) : [a, b]));
}

/** Longest-path ranks; a source that is no entry point sits just above the first node it feeds. */
function ranks(nodes, forward) {
  const n = nodes.length;
  const out = Array.from({ length: n }, () => []);
  const indegree = new Int32Array(n);
  for (const [a, b] of forward) {
    out[a].push(b);
    indegree[b]++;
  }
  const rank = new Array(n).fill(0);
  const queue = [];
  for (let v = 0; v < n; v++) if (!indegree[v]) queue.push(v);
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    for (const w of out[v]) {
      rank[w] = Math.max(rank[w], rank[v] + 1);
      if (--indegree[w] === 0) queue.push(w);
    }
  }
  const fed = new Uint8Array(n);
  for (const [, b] of forward) fed[b] = 1;
  const entries = nodes.some((node) => node.rank === "min");
  for (let v = 0; v < n; v++) rank[v] = nodes[v].rank === "min" ? 0 : rank[v] + (entries ? 1 : 0);
  for (let i = queue.length - 1; i >= 0; i--) {
    const v = queue[i];
    if (!fed[v] && out[v].length && nodes[v].rank !== "min") rank[v] = Math.min(...out[v].map((w) => rank[w])) - 1;
  }
  let deepest = 0;
  rank.forEach((r, v) => { if (nodes[v].rank !== "max") deepest = Math.max(deepest, r); });
  nodes.forEach((node, v) => {
    if (node.rank === "max") rank[v] = deepest + 1;
  });
  return rank;
}

/** Rows of node indices, ordered to cross few edges: first as the nodes came (the order they ran), then
 * sorted by the mean position of their neighbours, sweeping down and up. */
function orderRows(rank, up, down, count) {
  const rows = [];
  for (let v = 0; v < count; v++) (rows[rank[v]] ??= []).push(v);
  for (let r = 0; r < rows.length; r++) rows[r] ??= [];
  const position = new Float64Array(count);
  const number = () => rows.forEach((row) => row.forEach((v, i) => { position[v] = i; }));
  number();
  const sortBy = (row, neighbours) => {
    const key = new Map(row.map((v) => {
      const near = neighbours[v];
      return [v, near.length ? near.reduce((sum, w) => sum + position[w], 0) / near.length : position[v]];
    }));
    row.sort((a, b) => key.get(a) - key.get(b) || position[a] - position[b]);
    row.forEach((v, i) => { position[v] = i; });
  };
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    for (let r = 1; r < rows.length; r++) sortBy(rows[r], up);
    for (let r = rows.length - 2; r >= 0; r--) sortBy(rows[r], down);
  }
  return rows;
}

/** x centres: each row pulled towards its neighbours' centres, overlaps removed in order (blocks of
 * touching nodes settle at their members' mean wish). */
function placeX(rows, width, kind, up, down, nodeSep) {
  const x = new Float64Array(width.length);
  const gap = (a, b) => (kind[a] === "dummy" || kind[b] === "dummy" ? nodeSep / 2 : nodeSep);
  for (const row of rows) {
    let at = 0;
    row.forEach((v, i) => {
      if (i) at += gap(row[i - 1], v);
      x[v] = at + width[v] / 2;
      at += width[v];
    });
  }
  const settle = (row, neighbours) => {
    const wish = row.map((v) => (neighbours[v].length ? neighbours[v].reduce((s, w) => s + x[w], 0) / neighbours[v].length : x[v]));
    const blocks = [];
    row.forEach((v, i) => {
      let block = { first: i, last: i, size: width[v], sum: wish[i] - width[v] / 2, count: 1 };
      while (blocks.length) {
        const top = blocks[blocks.length - 1];
        const offset = top.size + gap(row[top.last], row[block.first]);
        if (top.sum / top.count + offset <= block.sum / block.count) break;
        blocks.pop();
        // The merged block's members keep their offsets; the later ones sit `offset` further right.
        const sum = top.sum + block.sum - block.count * offset;
        block = { first: top.first, last: block.last, size: offset + block.size, sum, count: top.count + block.count };
      }
      blocks.push(block);
    });
    for (const block of blocks) {
      let at = block.sum / block.count;
      for (let i = block.first; i <= block.last; i++) {
        if (i > block.first) at += gap(row[i - 1], row[i]);
        x[row[i]] = at + width[row[i]] / 2;
        at += width[row[i]];
      }
    }
  };
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    for (let r = 1; r < rows.length; r++) settle(rows[r], up);
    for (let r = rows.length - 2; r >= 0; r--) settle(rows[r], down);
  }
  return x;
}
