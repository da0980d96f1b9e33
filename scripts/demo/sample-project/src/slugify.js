'use strict';
const { transliterate } = require('./transliterate');

/**
 * "Crème Brûlée: a recipe!" -> "creme-brulee-a-recipe"
 * @param {string} title
 * @param {{ separator?: string }} [options]
 */
function slugify(title, options = {}) {
  const separator = options.separator ?? '-';
  return transliterate(String(title))
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, separator)
    .replace(new RegExp(`^${escape(separator)}+|${escape(separator)}+$`, 'g'), '');
}

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

module.exports = { slugify };
