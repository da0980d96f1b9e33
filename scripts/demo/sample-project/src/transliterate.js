'use strict';

// Letters that NFD normalisation does not split into a base letter plus marks.
const SPECIAL = { ß: 'ss', æ: 'ae', ø: 'o', œ: 'oe', ł: 'l', đ: 'd', þ: 'th' };

/** Latin text with accents and ligatures, reduced to ASCII. */
function transliterate(text) {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[ßæøœłđþ]/gi, (ch) => {
      const lower = SPECIAL[ch.toLowerCase()];
      return ch === ch.toLowerCase() ? lower : lower.toUpperCase();
    });
}

module.exports = { transliterate };
