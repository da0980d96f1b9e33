'use strict';
const { slugify } = require('./slugify');
const { transliterate } = require('./transliterate');

module.exports = { slugify, transliterate };
