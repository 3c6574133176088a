//! A session's connections by id, in id order: what a `BTreeMap` gave,
//! as two vectors. A session has a handful of connections and looks one
//! up several times per datagram; a scan of a few bytes beats a B-tree's
//! node walk, and iterating a slice beats its cursor (the tree's code was
//! a tenth of the simulator's instructions).

use crate::path::Path;
use crate::PathId;
use std::fmt;

/// Connections by id; iteration runs in ascending id order.
#[derive(Default)]
pub(crate) struct PathMap {
    /// Ascending; `paths[i]` is connection `ids[i]`.
    ids: Vec<PathId>,
    paths: Vec<Path>,
}

impl PathMap {
    fn position(&self, id: &PathId) -> Option<usize> {
        self.ids.iter().position(|k| k == id)
    }

    pub fn get(&self, id: &PathId) -> Option<&Path> {
        self.position(id).map(|i| &self.paths[i])
    }

    pub fn get_mut(&mut self, id: &PathId) -> Option<&mut Path> {
        self.position(id).map(|i| &mut self.paths[i])
    }

    pub fn contains_key(&self, id: &PathId) -> bool {
        self.position(id).is_some()
    }

    /// Adds connection `id`, returning the one it replaces.
    pub fn insert(&mut self, id: PathId, path: Path) -> Option<Path> {
        match self.ids.binary_search(&id) {
            Ok(i) => Some(std::mem::replace(&mut self.paths[i], path)),
            Err(i) => {
                self.ids.insert(i, id);
                self.paths.insert(i, path);
                None
            }
        }
    }

    /// Keeps the connections `keep` says to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&PathId, &mut Path) -> bool) {
        let mut i = 0;
        while i < self.ids.len() {
            if keep(&self.ids[i], &mut self.paths[i]) {
                i += 1;
            } else {
                self.ids.remove(i);
                self.paths.remove(i);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn keys(&self) -> std::slice::Iter<'_, PathId> {
        self.ids.iter()
    }

    pub fn values(&self) -> std::slice::Iter<'_, Path> {
        self.paths.iter()
    }

    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, Path> {
        self.paths.iter_mut()
    }

    pub fn iter(&self) -> std::iter::Zip<std::slice::Iter<'_, PathId>, std::slice::Iter<'_, Path>> {
        self.ids.iter().zip(self.paths.iter())
    }
}

impl std::ops::Index<&PathId> for PathMap {
    type Output = Path;

    fn index(&self, id: &PathId) -> &Path {
        self.get(id).expect("no connection with this id")
    }
}

impl<'a> IntoIterator for &'a PathMap {
    type Item = (&'a PathId, &'a Path);
    type IntoIter = std::iter::Zip<std::slice::Iter<'a, PathId>, std::slice::Iter<'a, Path>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl FromIterator<(PathId, Path)> for PathMap {
    fn from_iter<I: IntoIterator<Item = (PathId, Path)>>(iter: I) -> Self {
        let mut map = PathMap::default();
        for (id, path) in iter {
            map.insert(id, path);
        }
        map
    }
}

/// As a map, the way the `BTreeMap` it replaces printed.
impl fmt::Debug for PathMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(id: u8) -> Path {
        Path::cubic_for_test(PathId(id), 1200, 2)
    }

    #[test]
    fn iterates_in_id_order_whatever_the_insertion_order() {
        let mut map: PathMap = [3, 1, 2]
            .into_iter()
            .map(|i| (PathId(i), path(i)))
            .collect();
        let ids: Vec<u8> = map.keys().map(|id| id.0).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert!(map.values().map(|p| p.id()).eq(map.keys().copied()));
        assert!(map.insert(PathId(2), path(2)).is_some());
        assert_eq!(map.len(), 3);
        map.retain(|id, _| id.0 != 1);
        assert_eq!(map.keys().map(|id| id.0).collect::<Vec<_>>(), [2, 3]);
        assert!(map.get(&PathId(1)).is_none() && !map.contains_key(&PathId(1)));
        assert_eq!(map[&PathId(3)].id(), PathId(3));
        assert_eq!(map.get_mut(&PathId(2)).map(|p| p.id()), Some(PathId(2)));
    }
}
