'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { slugify, transliterate } = require('../src');

test('slugify lowercases and joins words with dashes', () => {
  assert.equal(slugify('Hello, World!'), 'hello-world');
});

test('slugify drops accents', () => {
  assert.equal(slugify('Crème Brûlée: a recipe!'), 'creme-brulee-a-recipe');
});

test('slugify takes a custom separator', () => {
  assert.equal(slugify('Straße am See', { separator: '_' }), 'strasse_am_see');
});

test('transliterate keeps case', () => {
  assert.equal(transliterate('Æther Łódź'), 'AEther Lodz');
});
